package core

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// DefaultRetention is Kafka's: 7 days, no size limit.
var DefaultRetention = log.Retention{Ms: (7 * 24 * time.Hour).Milliseconds(), Bytes: -1}

// DefaultRetentionCheckInterval is Kafka's log.retention.check.interval.ms.
const DefaultRetentionCheckInterval = 5 * time.Minute

// Retention check triggers (the replicad.trigger span attribute and the
// state.change log's trigger field).
const (
	retentionPeriodic = "periodic"
	retentionOperator = "operator"
)

// RetentionResult is one replica's outcome of a retention check.
type RetentionResult struct {
	TopicPartition tp.TopicPartition
	Error          ErrorCode
	Message        string
	// Leader: this broker led the partition at the check.
	Leader bool
	// LogStartBefore and LogStartAfter are the replica's log start
	// offset before and after the check (-1: unknown, with an error).
	LogStartBefore, LogStartAfter int64
	// DeletedSegments and DeletedBytes are what this check deleted.
	DeletedSegments int
	DeletedBytes    int64
	// Reason names the limits that deleted them, comma-separated
	// (log.ReasonRetentionMs, ...); empty when nothing was due.
	Reason string
}

// RetentionResponse is RunRetention's answer: the broker's, one result per
// partition checked.
type RetentionResponse struct {
	BrokerID int32
	Results  []RetentionResult
}

// RetentionCheckTimes are when the periodic retention check last ran and
// when it runs next (zero: not yet; the check starts with the first
// LeaderAndIsr).
func (rm *ReplicaManager) RetentionCheckTimes() (last, next time.Time) {
	ms := func(v int64) time.Time {
		if v == 0 {
			return time.Time{}
		}
		return time.UnixMilli(v)
	}
	return ms(rm.lastRetentionCheckMs.Load()), ms(rm.nextRetentionCheckMs.Load())
}

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
	// One check at a time, periodic or RunRetention: each reports what it
	// deleted itself, not what a concurrent one did.
	rm.retentionMu.Lock()
	defer rm.retentionMu.Unlock()
	now := rm.cfg.Clock.Now()
	rm.lastRetentionCheckMs.Store(now.UnixMilli())
	var raised int
	// Traced only when something is deleted: the check itself is as
	// periodic as the HW checkpoint, which is not traced either.
	var span trace.Span
	for _, p := range ps {
		res, acted := p.checkRetention(now.UnixMilli())
		if !acted {
			continue
		}
		if span == nil {
			_, span = rm.tracer.Start(context.Background(), "ReplicaManager.deleteOldSegments",
				trace.WithAttributes(attribute.String("replicad.trigger", retentionPeriodic)))
			defer span.End()
		}
		if rm.logRetention(res, retentionPeriodic) {
			raised++
		}
	}
	if span != nil {
		span.SetAttributes(attribute.Int("replicad.partitions", raised))
	}
}

// RunRetention runs the retention check now for the replicas of topic (of
// one partition when partition is set) this broker hosts, leader or
// follower, as the periodic check would, and answers what it deleted, per
// partition, by partition number. Operators run it to see retention act
// before they trust it. A partition named but not hosted here is
// UNKNOWN_TOPIC_OR_PARTITION, one on an offline log dir STORAGE_ERROR. It
// waits for a periodic check in progress (they never overlap), and takes
// the locks that check takes, so appends, fetches, DeleteRecords, log dir
// moves and deletions go on around it as around the periodic check.
func (rm *ReplicaManager) RunRetention(ctx context.Context, topic string, partition *int32) RetentionResponse {
	attrs := []attribute.KeyValue{attribute.String("replicad.trigger", retentionOperator), attribute.String("replicad.topic", topic)}
	if partition != nil {
		attrs = append(attrs, attribute.Int("replicad.partition", int(*partition)))
	}
	_, span := rm.tracer.Start(ctx, "ReplicaManager.deleteOldSegments", trace.WithAttributes(attrs...))
	defer span.End()
	type target struct {
		t    tp.TopicPartition
		p    *Partition
		code ErrorCode
	}
	var targets []target
	if partition != nil {
		t := tp.TopicPartition{Topic: topic, Partition: *partition}
		p, code := rm.onlinePartition(t)
		targets = append(targets, target{t, p, code})
	} else {
		rm.partitionsMu.RLock()
		for t, h := range rm.partitions {
			if t.Topic != topic {
				continue
			}
			if h.offline.Load() {
				targets = append(targets, target{t, nil, ErrStorageError})
			} else {
				targets = append(targets, target{t, h.partition, ErrNone})
			}
		}
		rm.partitionsMu.RUnlock()
		sort.Slice(targets, func(i, j int) bool { return tp.Less(targets[i].t, targets[j].t) })
	}
	rm.retentionMu.Lock()
	defer rm.retentionMu.Unlock()
	nowMs := rm.cfg.Clock.Now().UnixMilli()
	out := make([]RetentionResult, 0, len(targets))
	var segments, errs int
	var bytes int64
	for _, tg := range targets {
		if tg.code != ErrNone {
			msg := "not hosted on this broker"
			if tg.code == ErrStorageError {
				msg = "its log dir is offline"
			}
			out = append(out, RetentionResult{TopicPartition: tg.t, Error: tg.code, LogStartBefore: -1, LogStartAfter: -1, Message: msg})
			errs++
			continue
		}
		res, _ := tg.p.checkRetention(nowMs)
		rm.logRetention(res, retentionOperator)
		if res.Error != ErrNone {
			errs++
		}
		segments += res.DeletedSegments
		bytes += res.DeletedBytes
		out = append(out, res)
	}
	rm.stateLog.Info().Str("topic", topic).Str("trigger", retentionOperator).Int("partitions", len(out)).
		Int("deleted_segments", segments).Int64("deleted_bytes", bytes).Int("partition_errors", errs).
		Msg("retention check run on request")
	span.SetAttributes(attribute.Int("replicad.partitions", len(out)), attribute.Int("replicad.deleted_segments", segments),
		attribute.Int64("replicad.deleted_bytes", bytes), attribute.Int("replicad.partition_errors", errs))
	return RetentionResponse{BrokerID: rm.cfg.BrokerID, Results: out}
}

// logRetention logs a check's outcome for one replica on the state.change
// logger when it deleted something (a warning when it failed), and
// reports whether it deleted something.
func (rm *ReplicaManager) logRetention(res RetentionResult, trigger string) bool {
	role := "follower"
	if res.Leader {
		role = "leader"
	}
	t := res.TopicPartition
	if res.Error != ErrNone {
		rm.logger.Warn().Str("topic", t.Topic).Int32("partition", t.Partition).Str("role", role).Str("trigger", trigger).
			Str("error_code", res.Error.String()).Str("error", res.Message).Msg("retention could not raise the log start")
		return false
	}
	if res.DeletedSegments == 0 {
		return false
	}
	rm.stateLog.Info().Str("topic", t.Topic).Int32("partition", t.Partition).Str("trigger", trigger).
		Int64("log_start_offset", res.LogStartAfter).Int64("previous_log_start_offset", res.LogStartBefore).
		Int("segments", res.DeletedSegments).Int64("bytes", res.DeletedBytes).Str("reason", res.Reason).
		Msg("retention deleted old segments (" + role + ")")
	return true
}

// checkRetention is the retention check of this replica: where retention
// would move its log start (by its topic's retention.ms and
// retention.bytes, the broker's flags unless the topic overrides them,
// over its own segments below its HW), and that move, which deletes the
// segments below it. acted is false when there was nothing to do (nothing
// due, or the partition is no longer hosted): the periodic check says
// nothing of those.
//
// The plan is made without the partition's lock (it may read segment
// headers from disk); the move holds it for reading, as DeleteRecords
// does, and only when the role and the log are still those planned for: a
// leadership change in between answers NOT_LEADER_OR_FOLLOWER, a log dir
// move (a new log) plans again.
func (p *Partition) checkRetention(nowMs int64) (res RetentionResult, acted bool) {
	res = RetentionResult{TopicPartition: p.topicPartition, LogStartBefore: -1, LogStartAfter: -1}
	for attempt := 0; ; attempt++ {
		p.mu.RLock()
		l, stopped, leader := p.log, p.stopped, p.isLeaderLocked()
		r := log.Retention{Ms: p.topicConfig.RetentionMs, Bytes: p.topicConfig.RetentionBytes}
		p.mu.RUnlock()
		if l == nil || stopped {
			res.Error, res.Message = ErrNotLeaderOrFollower, "no longer hosted here"
			return res, false
		}
		res.Leader = leader
		res.LogStartBefore = l.LogStartOffset()
		res.LogStartAfter = res.LogStartBefore
		plan, err := l.PlanRetention(nowMs, r)
		if err != nil {
			res.Error, res.Message = storageErrorCode(err), "read a segment's timestamps: "+err.Error()
			return res, true
		}
		if !plan.Due() {
			return res, false
		}
		p.mu.RLock()
		switch {
		case p.stopped:
			p.mu.RUnlock()
			res.Error, res.Message = ErrNotLeaderOrFollower, "no longer hosted here"
			return res, true
		case p.log != l:
			// Moved to another log dir meanwhile: the plan was the old
			// log's. The new one starts where the old one did.
			p.mu.RUnlock()
			if attempt < 2 {
				continue
			}
			res.Error, res.Message = ErrNotLeaderOrFollower, "its log moved to another dir during the check"
			return res, true
		case p.isLeaderLocked() != leader:
			p.mu.RUnlock()
			res.Error, res.Message = ErrNotLeaderOrFollower, "its leadership changed during the check"
			return res, true
		}
		raised, err := l.IncrementLogStartOffset(plan.Start)
		if raised && leader {
			// Followers waiting in a fetch are answered now: they delete
			// what the leader deleted at once (as DeleteRecords).
			p.changed.notify()
		}
		p.mu.RUnlock()
		res.LogStartAfter = l.LogStartOffset()
		if err != nil {
			if errors.Is(err, log.ErrOffsetOutOfRange) {
				// The HW fell below it meanwhile (a truncation): the next
				// check tries again.
				res.Error = ErrOffsetOutOfRange
			} else {
				res.Error = storageErrorCode(err)
			}
			res.Message = err.Error()
			return res, true
		}
		// Counted as this check's only when it moved the log start (or
		// deleted the leftovers below it): a DeleteRecords or the leader's
		// log start that raised it first deleted them.
		if raised || plan.Start == res.LogStartBefore {
			res.DeletedSegments, res.DeletedBytes = plan.Segments, plan.Bytes
			res.Reason = strings.Join(plan.Reasons, ",")
		}
		return res, true
	}
}
