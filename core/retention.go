package core

import (
	"context"
	"errors"
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
// LogManager.cleanupLogs for cleanup.policy=delete): every replica here,
// leader or follower, raises its log start past the oldest of its own
// segments that retention no longer keeps, which deletes them. A follower
// applies retention to its own segments as Kafka's do: where they begin is
// where its appends fell (its segment.bytes, segment.ms, its restarts), not
// the leader's, so the leader's log start alone could leave it a whole
// segment, or everything, over retention (it follows that log start too, at
// every fetch answer: fetcher.followLogStart). Only segments below the
// replica's HW go, so a follower deletes only committed records. It runs on
// the retention loop's goroutine, off the produce path: a log is locked only
// while its log start moves and its segments are unlinked.
func (rm *ReplicaManager) applyRetention() {
	// Producer expiry shares the loop (Kafka runs it every
	// producer.id.expiration.check.interval.ms, 10 minutes).
	defer rm.expireProducers()
	ps := rm.onlinePartitions()
	nowMs := rm.cfg.Clock.Now().UnixMilli()
	var raised int
	// Traced only when something is deleted: the check itself is as
	// periodic as the HW checkpoint, which is not traced either.
	var span trace.Span
	for _, p := range ps {
		start, leader, ok := p.retentionStart(nowMs, rm.logger)
		if !ok {
			continue
		}
		if span == nil {
			_, span = rm.tracer.Start(context.Background(), "ReplicaManager.deleteOldSegments")
			defer span.End()
		}
		role, newStart, code := "leader", int64(0), ErrNone
		if leader {
			newStart, code = p.deleteRecordsOnLeader(start)
		} else {
			role = "follower"
			newStart, code = p.deleteOldSegmentsOnFollower(start)
		}
		if code != ErrNone {
			rm.logger.Warn().Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
				Str("role", role).Str("error_code", code.String()).Msg("retention could not raise the log start")
			continue
		}
		raised++
		rm.stateLog.Info().Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
			Int64("log_start_offset", newStart).Msg("retention deleted old segments (" + role + ")")
	}
	if span != nil {
		span.SetAttributes(attribute.Int("replicad.partitions", raised))
	}
}

// deleteOldSegmentsOnFollower raises a follower's log start to offset, at
// most its HW (IncrementLogStartOffset refuses more), deleting the segments
// below it. It returns the new log start.
func (p *Partition) deleteOldSegmentsOnFollower(offset int64) (int64, ErrorCode) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped || p.isLeaderLocked() || p.log == nil {
		return 0, ErrNotLeaderOrFollower
	}
	if _, err := p.log.IncrementLogStartOffset(offset); err != nil {
		if errors.Is(err, log.ErrOffsetOutOfRange) {
			// The HW fell below it meanwhile (a truncation): the next check
			// tries again.
			return 0, ErrOffsetOutOfRange
		}
		return 0, storageErrorCode(err)
	}
	return max(offset, p.log.LogStartOffset()), ErrNone
}

// retentionStart is where retention would move the log start of this
// partition, when that is past the current log start, and whether this
// broker leads it: by its topic's retention.ms and retention.bytes (the
// broker's flags unless the topic overrides them), over this replica's own
// segments below its HW.
func (p *Partition) retentionStart(nowMs int64, logger zerolog.Logger) (start int64, leader, ok bool) {
	p.mu.RLock()
	l, stopped := p.log, p.stopped
	leader = p.isLeaderLocked()
	r := log.Retention{Ms: p.topicConfig.RetentionMs, Bytes: p.topicConfig.RetentionBytes}
	p.mu.RUnlock()
	if l == nil || stopped {
		return 0, false, false
	}
	start, err := l.RetentionStart(nowMs, r)
	if err != nil {
		logger.Warn().Err(err).Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
			Msg("retention could not read a segment's timestamps")
		return 0, false, false
	}
	if start <= l.LogStartOffset() {
		return 0, false, false
	}
	return start, leader, true
}
