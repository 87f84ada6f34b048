package core

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// DeleteRecordsHighWatermark as a DeleteRecordsPartition.Offset deletes
// everything below the HW (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
const DeleteRecordsHighWatermark = -1

// MaxDeleteRecordsTimeout caps DeleteRecordsRequest.Timeout.
const MaxDeleteRecordsTimeout = 5 * time.Minute

// DeleteRecordsRequest asks the leaders of its partitions to delete the
// records below each offset (Kafka's DeleteRecords).
type DeleteRecordsRequest struct {
	Partitions []DeleteRecordsPartition
	// Timeout bounds the wait for the ISR to delete them too; at most
	// MaxDeleteRecordsTimeout, and 0 does not wait.
	Timeout time.Duration
}

// DeleteRecordsPartition is one partition of a DeleteRecordsRequest.
type DeleteRecordsPartition struct {
	TopicPartition tp.TopicPartition
	// Offset is the new log start: records below it go. At most the HW;
	// DeleteRecordsHighWatermark: the HW.
	Offset int64
}

// DeleteRecordsResult is a partition's outcome.
type DeleteRecordsResult struct {
	TopicPartition tp.TopicPartition
	// LowWatermark is the smallest log start of the leader and its ISR once
	// done: every in-sync replica holds no record below it.
	LowWatermark int64
	Error        ErrorCode
}

// DeleteRecordsResponse has one result per requested partition, in order.
type DeleteRecordsResponse struct {
	Partitions []DeleteRecordsResult
}

// DeleteRecords raises each partition's log start on this broker, its
// leader, then waits until every ISR member has raised its own (they follow
// the leader's at their next fetch), at most req.Timeout: Kafka's
// ReplicaManager.deleteRecords with its DelayedDeleteRecords. A partition
// this broker does not lead is NOT_LEADER_OR_FOLLOWER, an offset above the
// HW OFFSET_OUT_OF_RANGE, one whose ISR did not follow in time
// REQUEST_TIMED_OUT (the leader's deletion stands, and the followers still
// follow it).
func (rm *ReplicaManager) DeleteRecords(ctx context.Context, req DeleteRecordsRequest) DeleteRecordsResponse {
	ctx, span := rm.tracer.Start(ctx, "ReplicaManager.deleteRecords", trace.WithAttributes(
		attribute.Int("replicad.partitions", len(req.Partitions))))
	defer span.End()
	resp := DeleteRecordsResponse{Partitions: make([]DeleteRecordsResult, len(req.Partitions))}
	targets := make([]int64, len(req.Partitions))
	parts := make([]*Partition, len(req.Partitions))
	for i, dp := range req.Partitions {
		res := &resp.Partitions[i]
		*res = DeleteRecordsResult{TopicPartition: dp.TopicPartition, LowWatermark: -1}
		p, code := rm.onlinePartition(dp.TopicPartition)
		if code == ErrNone {
			targets[i], code = p.deleteRecordsOnLeader(dp.Offset)
		}
		if code != ErrNone {
			res.Error = code
			continue
		}
		parts[i] = p
		rm.stateLog.Info().Str("topic", dp.TopicPartition.Topic).Int32("partition", dp.TopicPartition.Partition).
			Int64("log_start_offset", targets[i]).Msg("deleted records below the new log start (leader)")
	}
	expired := make(chan struct{})
	if timeout := min(req.Timeout, MaxDeleteRecordsTimeout); timeout > 0 {
		t := rm.cfg.Clock.AfterFunc(timeout, func() { close(expired) })
		defer t.Stop()
	} else {
		close(expired) // no wait: the ISR has followed or not
	}
	for i, p := range parts {
		if p == nil {
			continue
		}
		resp.Partitions[i].LowWatermark, resp.Partitions[i].Error = p.waitLowWatermark(ctx, targets[i], expired, rm.stopCh)
	}
	errs := 0
	for _, r := range resp.Partitions {
		if r.Error != ErrNone {
			errs++
		}
	}
	span.SetAttributes(attribute.Int("replicad.partition_errors", errs))
	return resp
}

// deleteRecordsOnLeader raises the leader's log start to offset (the HW
// for DeleteRecordsHighWatermark) and returns it.
func (p *Partition) deleteRecordsOnLeader(offset int64) (int64, ErrorCode) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped || !p.isLeaderLocked() || p.log == nil {
		return 0, ErrNotLeaderOrFollower
	}
	hw := p.log.HighWatermark()
	if offset == DeleteRecordsHighWatermark {
		offset = hw
	}
	if offset < 0 || offset > hw {
		return 0, ErrOffsetOutOfRange
	}
	raised, err := p.log.IncrementLogStartOffset(offset)
	if err != nil {
		if errors.Is(err, log.ErrOffsetOutOfRange) {
			return 0, ErrOffsetOutOfRange
		}
		return 0, storageErrorCode(err)
	}
	if raised {
		// Followers waiting in a fetch are answered now (FetchMessages
		// answers a moved log start), not at their max wait: they delete
		// what the leader deleted, and DeleteRecords's low watermark
		// moves, at once.
		p.changed.notify()
	}
	return max(offset, p.log.LogStartOffset()), ErrNone
}

// lowWatermark is the smallest log start of the leader and its ISR members
// (Kafka's lowWatermarkIfLeader, over the ISR: those are the replicas that
// must no longer serve the deleted records); a member that has not fetched
// in this epoch counts as unknown (-1).
func (p *Partition) lowWatermark() (int64, ErrorCode) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped || !p.isLeaderLocked() || p.log == nil {
		return -1, ErrNotLeaderOrFollower
	}
	low := p.log.LogStartOffset()
	// A copy being moved to another log dir (a future log) is not waited
	// for, unlike in Kafka's lowWatermarkIfLeader: it serves nothing, it
	// follows the current log's start as it copies (the alter-log-dirs
	// fetcher), and the swap raises it first (replaceCurrentWithFutureLog).
	for _, id := range p.isr {
		if r, ok := p.remoteReplicas[id]; ok {
			low = min(low, r.logStartOffset)
		}
	}
	return low, ErrNone
}

// waitLowWatermark waits until the low watermark reaches target, woken by
// the followers' fetches (updateFollowerFetchState notifies when a log start
// moves).
func (p *Partition) waitLowWatermark(ctx context.Context, target int64, expired, stop <-chan struct{}) (int64, ErrorCode) {
	for {
		changed := p.changed.wait()
		low, code := p.lowWatermark()
		if code != ErrNone || low >= target {
			return low, code
		}
		select {
		case <-changed:
		case <-expired:
			return low, ErrRequestTimedOut
		case <-ctx.Done():
			return low, ErrRequestTimedOut
		case <-stop:
			return low, ErrNotLeaderOrFollower
		}
	}
}
