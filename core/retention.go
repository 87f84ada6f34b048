package core

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/log"
)

// DefaultRetention is Kafka's: 7 days, no size limit.
var DefaultRetention = log.Retention{Ms: (7 * 24 * time.Hour).Milliseconds(), Bytes: -1}

// DefaultRetentionCheckInterval is Kafka's log.retention.check.interval.ms.
const DefaultRetentionCheckInterval = 5 * time.Minute

// applyRetention is the periodic retention check (Kafka's
// LogManager.cleanupLogs for cleanup.policy=delete): every partition this
// broker leads raises its log start past the oldest segments retention no
// longer keeps, which deletes them; its followers follow the new log start
// at their next fetch (fetcher.followLogStart), as after DeleteRecords. It
// runs on the retention loop's goroutine, off the produce path: a log is
// locked only while its log start moves and its segments are unlinked.
func (rm *ReplicaManager) applyRetention() {
	ps := rm.onlinePartitions()
	nowMs := rm.cfg.Clock.Now().UnixMilli()
	var raised int
	// Traced only when something is deleted: the check itself is as
	// periodic as the HW checkpoint, which is not traced either.
	var span trace.Span
	for _, p := range ps {
		start, ok := p.retentionStart(nowMs, rm.logger)
		if !ok {
			continue
		}
		if span == nil {
			_, span = rm.tracer.Start(context.Background(), "ReplicaManager.deleteOldSegments")
			defer span.End()
		}
		newStart, code := p.deleteRecordsOnLeader(start)
		if code != ErrNone {
			rm.logger.Warn().Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
				Str("error_code", code.String()).Msg("retention could not raise the log start")
			continue
		}
		raised++
		rm.stateLog.Info().Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
			Int64("log_start_offset", newStart).Msg("retention deleted old segments (leader)")
	}
	if span != nil {
		span.SetAttributes(attribute.Int("replicad.partitions", raised))
	}
}

// retentionStart is where retention would move the log start of this
// partition, when it leads it and that is past the current log start: by
// its topic's retention.ms and retention.bytes (the broker's flags unless
// the topic overrides them).
func (p *Partition) retentionStart(nowMs int64, logger zerolog.Logger) (int64, bool) {
	p.mu.RLock()
	l, leader := p.log, !p.stopped && p.isLeaderLocked()
	r := log.Retention{Ms: p.topicConfig.RetentionMs, Bytes: p.topicConfig.RetentionBytes}
	p.mu.RUnlock()
	if l == nil || !leader {
		return 0, false
	}
	start, err := l.RetentionStart(nowMs, r)
	if err != nil {
		logger.Warn().Err(err).Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
			Msg("retention could not read a segment's timestamps")
		return 0, false
	}
	if start <= l.LogStartOffset() {
		return 0, false
	}
	return start, true
}
