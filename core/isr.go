package core

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/tp"
)

// IsrChange proposes a new ISR for a partition this broker leads (one item of
// Kafka's AlterPartition request).
type IsrChange struct {
	TopicPartition tp.TopicPartition
	LeaderID       int32
	LeaderEpoch    int32
	// PartitionEpoch is the version the change is based on: a controller
	// rejects a change based on a version it has moved past
	// (INVALID_UPDATE_VERSION).
	PartitionEpoch int32
	NewIsr         []int32 // sorted
	// BrokerEpochs holds the broker epoch of each follower in NewIsr that
	// the leader learned from its fetches (Kafka's newIsrWithEpochs), so a
	// controller can refuse a joining replica from a broker's previous life
	// (STALE_BROKER_EPOCH). A member missing from it is unknown; the leader
	// itself is never in it.
	BrokerEpochs map[int32]int64
	// SpanContext is the change's Partition.shrinkIsr / Partition.expandIsr
	// span: an IsrChanger that sends it on sends it in that trace.
	SpanContext trace.SpanContext
	// Withdrawn reports (nil: never) that the Partition no longer wants the
	// change: it was stopped (its topic deleted) or a LeaderAndIsr replaced
	// the state the change was based on. An IsrChanger still holding the
	// change (queued, or retrying while the controller is away) must not
	// send it again. AlterPartition names a partition by topic name only,
	// and a re-created topic starts again at leader epoch 0 and partition
	// epoch 0: a deleted incarnation's change retried after the re-creation
	// matches the new one, the controller commits it, and the new
	// incarnation's leader, whose Partition ignores the answer, keeps an
	// ISR the controller no longer has, with nothing to ever reconcile them
	// (tests/sim, seed 647001108).
	Withdrawn func() bool
}

// IsrChangeResult is the outcome of an IsrChange. On success Isr and
// PartitionEpoch are what is now committed (the controller may answer an ISR
// other than the one proposed).
type IsrChangeResult struct {
	Error          ErrorCode
	Isr            []int32
	PartitionEpoch int32
}

// IsrChanger commits ISR changes (Kafka's AlterPartitionManager). Standalone,
// StandaloneIsrChanger applies them at once; with a controller, an
// implementation sends AlterPartition and answers when the controller does.
//
// The Partition keeps at most one change in flight: it proposes nothing new
// until done has been called. While an expansion is in flight its follower
// already counts for the HW (Kafka's "maximal ISR"), and it is dropped again
// only when the controller says it did not apply it (OPERATION_NOT_ATTEMPTED,
// INELIGIBLE_REPLICA); a shrink takes effect only once accepted. Other
// errors keep the change pending until a LeaderAndIsr replaces it, or submit
// it again (see completeIsrChange). So an asynchronous implementation needs
// no state of its own per partition.
type IsrChanger interface {
	// Submit proposes change. done must be called exactly once, from any
	// goroutine, possibly before Submit returns. Submit is never called
	// with a partition lock held, and done takes the partition's lock.
	Submit(change IsrChange, done func(IsrChangeResult))
}

// StandaloneIsrChanger is the IsrChanger of a broker without a controller: it
// accepts every change and bumps the partition epoch, as Kafka's ZooKeeper
// mode did with the partition state's zkVersion.
type StandaloneIsrChanger struct{}

// Submit accepts change at once.
func (StandaloneIsrChanger) Submit(change IsrChange, done func(IsrChangeResult)) {
	done(IsrChangeResult{Isr: slices.Clone(change.NewIsr), PartitionEpoch: change.PartitionEpoch + 1})
}

// pendingIsrChange is the partition's ISR change in flight.
type pendingIsrChange struct {
	change IsrChange
	expand bool
	// span is the change's Partition.shrinkIsr / expandIsr span, ended
	// when the change completes.
	span trace.Span
}

// maximalIsrLocked is the ISR the HW is computed over: the committed ISR
// plus the follower of an expansion in flight. Counting an expansion at once
// is safe because the follower has already reached the HW; a shrink in
// flight does not count yet, since the controller may reject it.
func (p *Partition) maximalIsrLocked() []int32 {
	if p.pendingIsr != nil && p.pendingIsr.expand {
		return p.pendingIsr.change.NewIsr
	}
	return p.isr
}

// isFollowerInSyncLocked is the ISR expansion condition: the follower has
// reached the HW and the start of the current leader epoch. The second part
// is KAFKA-7128: below the epoch start the follower may still hold records of
// an older epoch that this leader truncated, and must not count for the HW
// before it has fetched (and so truncated) past them.
func (p *Partition) isFollowerInSyncLocked(r *replicaState) bool {
	return r.logEndOffset != unknownOffset &&
		r.logEndOffset >= p.log.HighWatermark() &&
		r.logEndOffset >= p.leaderEpochStartOffset
}

// maybeExpandIsrLocked proposes adding the follower to the ISR once it is in
// sync (Kafka's Partition.maybeExpandIsr). It returns the change to submit
// after p.mu is released, or nil.
func (p *Partition) maybeExpandIsrLocked(r *replicaState) *pendingIsrChange {
	if !p.isLeaderLocked() || p.pendingIsr != nil || slices.Contains(p.isr, r.brokerID) || !p.isFollowerInSyncLocked(r) {
		return nil
	}
	pending := p.proposeIsrLocked(sortedSet(append(slices.Clone(p.isr), r.brokerID)), true /* expand */)
	pending.span.SetAttributes(attribute.Int("replicad.replica", int(r.brokerID)), attribute.Int64("replicad.replica_log_end_offset", r.logEndOffset))
	return pending
}

// outOfSyncReplicasLocked lists the ISR followers that are behind the
// leader's LEO and have not caught up for maxLag (Kafka's
// getOutOfSyncReplicas). The leader is never among them.
func (p *Partition) outOfSyncReplicasLocked(now time.Time, maxLag time.Duration) []int32 {
	leo := p.log.LogEndOffset()
	var out []int32
	for _, id := range p.isr {
		if id == p.env.brokerID {
			continue
		}
		r, ok := p.remoteReplicas[id]
		if !ok || (r.logEndOffset != leo && now.Sub(r.lastCaughtUpTime) > maxLag) {
			out = append(out, id)
		}
	}
	return out
}

// maybeShrinkIsr proposes removing the followers that fell out of sync
// (Kafka's Partition.maybeShrinkIsr). The ISR changes only once the change is
// accepted; the HW may then move, unless the ISR is under min.insync.replicas.
func (p *Partition) maybeShrinkIsr(maxLag time.Duration) {
	p.mu.Lock()
	var pending *pendingIsrChange
	if p.isLeaderLocked() && !p.stopped && p.log != nil && p.pendingIsr == nil {
		if out := p.outOfSyncReplicasLocked(p.env.clock.Now(), maxLag); len(out) > 0 {
			newIsr := slices.DeleteFunc(slices.Clone(p.isr), func(id int32) bool { return slices.Contains(out, id) })
			p.env.logger.Info().Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
				Int32("leader_epoch", p.leaderEpoch).Ints32("out_of_sync", out).Ints32("isr", p.isr).
				Int64("log_end_offset", p.log.LogEndOffset()).Msg("shrinking ISR")
			pending = p.proposeIsrLocked(newIsr, false /* expand */)
			pending.span.SetAttributes(attribute.IntSlice("replicad.out_of_sync_replicas", ints(out)))
		}
	}
	p.mu.Unlock()
	p.submitIsrChange(pending)
}

// proposeIsrLocked records newIsr as the change in flight, and starts its
// span (a root: the leader decides on its own), ended by completeIsrChange.
func (p *Partition) proposeIsrLocked(newIsr []int32, expand bool) *pendingIsrChange {
	name := "Partition.shrinkIsr"
	if expand {
		name = "Partition.expandIsr"
	}
	_, span := p.env.tracer.Start(context.Background(), name, trace.WithAttributes(append(partitionAttrs(p.topicPartition),
		attribute.Int("replicad.leader", int(p.env.brokerID)), attribute.Int("replicad.leader_epoch", int(p.leaderEpoch)),
		attribute.Int("replicad.old_partition_epoch", int(p.partitionEpoch)), attribute.IntSlice("replicad.old_isr", ints(p.isr)),
		attribute.IntSlice("replicad.proposed_isr", ints(newIsr)), attribute.Int64("replicad.high_watermark", p.log.HighWatermark()),
		attribute.Int64("replicad.log_end_offset", p.log.LogEndOffset()))...))
	p.pendingIsr = &pendingIsrChange{expand: expand, span: span, change: IsrChange{
		SpanContext:    span.SpanContext(),
		TopicPartition: p.topicPartition,
		LeaderID:       p.env.brokerID,
		LeaderEpoch:    p.leaderEpoch,
		PartitionEpoch: p.partitionEpoch,
		NewIsr:         newIsr,
		BrokerEpochs:   p.knownBrokerEpochsLocked(newIsr),
	}}
	pending := p.pendingIsr
	pending.change.Withdrawn = func() bool {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return p.stopped || p.pendingIsr != pending
	}
	return pending
}

// knownBrokerEpochsLocked is the broker epoch of each follower in isr that
// has sent one in a fetch.
func (p *Partition) knownBrokerEpochsLocked(isr []int32) map[int32]int64 {
	out := make(map[int32]int64, len(isr))
	for _, id := range isr {
		if r, ok := p.remoteReplicas[id]; ok && r.brokerEpoch >= 0 {
			out[id] = r.brokerEpoch
		}
	}
	return out
}

// submitIsrChange hands a proposed change to the IsrChanger. p.mu must not be
// held: the changer may answer at once, and the answer takes p.mu.
func (p *Partition) submitIsrChange(pending *pendingIsrChange) {
	if pending == nil {
		return
	}
	p.env.isrChanger.Submit(pending.change, func(res IsrChangeResult) { p.completeIsrChange(pending, res) })
}

// completeIsrChange applies the outcome of the change in flight (Kafka's
// Partition.handleAlterPartitionError for the errors). An answer for a
// change that a LeaderAndIsr has since replaced is ignored: the controller's
// word is newer.
//
// Only NONE, OPERATION_NOT_ATTEMPTED and INELIGIBLE_REPLICA are clear. Any
// other answer leaves open whether the controller committed the change: its
// answer to an earlier attempt may have been lost, and a retry is then
// refused (FENCED_LEADER_EPOCH once the epoch moved on, for one). Dropping
// an expansion then would compute the HW over an ISR smaller than the
// controller's, and ack an acks=all record that a member the controller may
// elect lacks. So the change stays pending, its follower counted for the
// HW, until new metadata (a LeaderAndIsr) replaces it; errors that say
// nothing about the state (a timeout, an unknown error) submit it again.
func (p *Partition) completeIsrChange(pending *pendingIsrChange, res IsrChangeResult) {
	p.mu.Lock()
	if p.pendingIsr != pending {
		p.mu.Unlock()
		endIsrChangeSpan(pending.span, res, isrOutcomeSuperseded)
		return
	}
	outcome := isrOutcomeOf(res.Error)
	ev := p.env.logger.Info()
	switch outcome {
	case isrOutcomeCommitted:
		p.pendingIsr = nil
		p.isr = sortedSet(res.Isr)
		p.partitionEpoch = res.PartitionEpoch
		p.env.recordIsrChange(p.topicPartition, pending.expand)
	case isrOutcomeReset:
		// The controller says the change was not applied, and cannot be by
		// any controller: the committed ISR is the truth, and a rejected
		// expansion's follower no longer counts for the HW (which itself
		// never moves back).
		p.pendingIsr = nil
		ev = p.env.logger.Warn().Str("error", res.Error.String())
	case isrOutcomePending:
		ev = p.env.logger.Warn().Str("error", res.Error.String()).Str("outcome", "pending until the controller's next LeaderAndIsr")
	case isrOutcomeRetried:
		ev = p.env.logger.Warn().Str("error", res.Error.String()).Str("outcome", "submitted again")
	}
	ev.Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
		Int32("leader_epoch", p.leaderEpoch).Int32("partition_epoch", p.partitionEpoch).
		Ints32("proposed_isr", pending.change.NewIsr).Ints32("isr", p.isr).Msg("ISR change completed")
	p.maybeIncrementLeaderHWLocked()
	p.mu.Unlock()
	if outcome == isrOutcomeRetried {
		// The span goes on with the retry, to the outcome that ends it.
		pending.span.AddEvent("retried", trace.WithAttributes(attribute.String("replicad.error_code", res.Error.String())))
		// Outside p.mu: the changer may answer at once.
		p.submitIsrChange(pending)
		return
	}
	endIsrChangeSpan(pending.span, res, outcome)
	// Waiters re-check: the HW may have moved, and an acks=-1 produce's
	// min.insync.replicas check depends on the ISR.
	p.changed.notify()
}

// isrOutcome is what an answer to an ISR change does to the partition.
type isrOutcome string

const (
	isrOutcomeCommitted  isrOutcome = "committed"
	isrOutcomeReset      isrOutcome = "reset to the committed ISR"
	isrOutcomePending    isrOutcome = "pending until new metadata"
	isrOutcomeRetried    isrOutcome = "retried"
	isrOutcomeSuperseded isrOutcome = "superseded by a LeaderAndIsr"
)

// isrOutcomeOf sorts the answers to an ISR change (Kafka's
// handleAlterPartitionError, which resets only on OPERATION_NOT_ATTEMPTED and
// INELIGIBLE_REPLICA and retries what it does not know).
func isrOutcomeOf(code ErrorCode) isrOutcome {
	switch code {
	case ErrNone:
		return isrOutcomeCommitted
	case ErrOperationNotAttempted, ErrIneligibleReplica:
		// The controller checked the partition epoch and did not apply
		// the change; no controller, past or future, can have.
		return isrOutcomeReset
	case ErrFencedLeaderEpoch, ErrUnknownLeaderEpoch, ErrInvalidUpdateVersion, ErrNotLeaderOrFollower,
		ErrUnknownTopicOrPartition, ErrInvalidRequest, ErrStaleBrokerEpoch, ErrBrokerNotAvailable:
		// This leader's view is stale (or the changer is closing): the
		// controller's metadata will settle it, and a retry would be
		// refused the same way.
		return isrOutcomePending
	default:
		return isrOutcomeRetried
	}
}

// endIsrChangeSpan ends an ISR change's span with its outcome.
func endIsrChangeSpan(span trace.Span, res IsrChangeResult, outcome isrOutcome) {
	if span.IsRecording() {
		span.SetAttributes(attribute.Bool("replicad.superseded", outcome == isrOutcomeSuperseded),
			attribute.String("replicad.outcome", string(outcome)))
		setErrorCode(span, res.Error)
		if res.Error == ErrNone {
			span.SetAttributes(attribute.IntSlice("replicad.isr", ints(res.Isr)), attribute.Int("replicad.partition_epoch", int(res.PartitionEpoch)))
		}
	}
	span.End()
}

// maybeShrinkIsr runs the ISR shrink check on every partition this broker
// leads (Kafka's ReplicaManager.maybeShrinkIsr, every replica.lag.time.max.ms / 2).
func (rm *ReplicaManager) maybeShrinkIsr() {
	for _, p := range rm.onlinePartitions() {
		p.maybeShrinkIsr(rm.cfg.ReplicaLagTimeMax)
	}
}

// onlinePartitions is every hosted partition not offline, for the periodic
// checks.
func (rm *ReplicaManager) onlinePartitions() []*Partition {
	rm.partitionsMu.RLock()
	defer rm.partitionsMu.RUnlock()
	ps := make([]*Partition, 0, len(rm.partitions))
	for _, h := range rm.partitions {
		if !h.offline.Load() {
			ps = append(ps, h.partition)
		}
	}
	return ps
}
