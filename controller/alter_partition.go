package controller

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/telemetry"
)

// alterPartition commits ISR changes proposed by a leader. Each item is
// checked on its own (the matrix in checkAlterPartition); the accepted ones
// are persisted in one transaction and every item is answered with the
// committed state or its error.
func (c *Controller) alterPartition(ctx context.Context, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.alterPartition", trace.WithAttributes(
		attribute.Int("replicad.broker", int(req.GetBrokerId())), attribute.Int64("replicad.broker_epoch", req.GetBrokerEpoch()),
		attribute.Int("replicad.partitions", len(req.GetPartitions()))))
	defer span.End()
	c.lock()
	defer c.unlock()
	if !c.active {
		return nil, errNotController
	}
	resp := &replicadv1.AlterPartitionResponse{}
	if bs, ok := c.brokers[req.GetBrokerId()]; !ok || bs.info.Epoch != req.GetBrokerEpoch() || bs.info.Fenced {
		// The leader is a fenced or earlier incarnation: its view of the
		// ISR is not to be trusted.
		resp.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH
		span.SetAttributes(telemetry.ErrorCode(resp.ErrorCode))
		return resp, nil
	}
	results := make([]*replicadv1.AlterPartitionResult, len(req.GetPartitions()))
	var updates []store.PartitionUpdate
	// stale are the partitions this leader leads at the current leader
	// epoch but knows at an older partition epoch: it keeps its change
	// pending on such an answer (the state may hold it), so it is sent the
	// committed state, which it takes as an ISR refresh.
	var stale []store.Partition
	// The ISR changes are traced: one event per item, accepted or not.
	events := newEventBudget(ctx)
	if events != nil {
		defer events.Done()
		if n := len(req.GetPartitions()); n == 1 {
			item := req.GetPartitions()[0]
			span.SetAttributes(attribute.String("replicad.topic", item.GetTopic()), attribute.Int("replicad.partition", int(item.GetPartition())),
				attribute.Int("replicad.leader_epoch", int(item.GetLeaderEpoch())), attribute.IntSlice("replicad.proposed_isr", toInts(isrOf(item))))
		}
	}
	for i, item := range req.GetPartitions() {
		p, ok := c.parts[partitionKey{item.GetTopic(), item.GetPartition()}]
		if !ok {
			results[i] = &replicadv1.AlterPartitionResult{Topic: item.GetTopic(), Partition: item.GetPartition(),
				ErrorCode: replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}
			continue
		}
		code, next := c.checkAlterPartitionLocked(req.GetBrokerId(), p, item)
		if code != replicadv1.ErrorCode_ERROR_CODE_NONE {
			c.log.Info().Str("topic", p.Topic).Int32("partition", p.Partition).Int32("leader", req.GetBrokerId()).
				Str("error_code", telemetry.ErrorCodeName(code)).Ints32("proposed_isr", isrOf(item)).Ints32("isr", p.ISR).
				Int32("partition_epoch", item.GetPartitionEpoch()).Int32("committed_partition_epoch", p.PartitionEpoch).
				Msg("AlterPartition rejected")
			results[i] = &replicadv1.AlterPartitionResult{Topic: p.Topic, Partition: p.Partition, ErrorCode: code}
			if code == replicadv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION {
				stale = append(stale, p)
			}
			if events.Want() {
				events.Add("isr change rejected", attribute.String("replicad.topic", p.Topic), attribute.Int("replicad.partition", int(p.Partition)),
					telemetry.ErrorCode(code), attribute.IntSlice("replicad.proposed_isr", toInts(isrOf(item))),
					attribute.IntSlice("replicad.isr", toInts(p.ISR)), attribute.Int("replicad.leader_epoch", int(item.GetLeaderEpoch())),
					attribute.Int("replicad.partition_epoch", int(item.GetPartitionEpoch())),
					attribute.Int("replicad.committed_partition_epoch", int(p.PartitionEpoch)))
			}
			continue
		}
		if events.Want() {
			events.Add("isr change", attribute.String("replicad.topic", p.Topic), attribute.Int("replicad.partition", int(p.Partition)),
				attribute.IntSlice("replicad.old_isr", toInts(p.ISR)), attribute.IntSlice("replicad.isr", toInts(next.ISR)),
				attribute.Int("replicad.leader", int(p.Leader)), attribute.Int("replicad.leader_epoch", int(p.LeaderEpoch)),
				attribute.Int("replicad.partition_epoch", int(next.PartitionEpoch)),
				attribute.Bool("replicad.changed", next.PartitionEpoch != p.PartitionEpoch))
		}
		if next.PartitionEpoch != p.PartitionEpoch {
			updates = append(updates, update(p, next))
		}
		results[i] = nil // filled from the committed state below
	}
	if _, err := c.commitISRLocked(ctx, updates); err != nil {
		return nil, err
	}
	span.SetAttributes(attribute.Int("replicad.partitions_changed", len(updates)))
	for i, item := range req.GetPartitions() {
		if results[i] == nil {
			p := c.parts[partitionKey{item.GetTopic(), item.GetPartition()}]
			results[i] = &replicadv1.AlterPartitionResult{Topic: p.Topic, Partition: p.Partition,
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Isr: slices.Clone(p.ISR), PartitionEpoch: p.PartitionEpoch}
		}
	}
	resp.Partitions = results
	c.refreshLeaderLocked(ctx, req.GetBrokerId(), stale)
	// A reassignment completes once every added replica is in the ISR.
	for _, u := range updates {
		if err := c.maybeCompleteReassignmentLocked(ctx, keyOf(u.New)); err != nil {
			c.log.Error().Err(err).Str("topic", u.New.Topic).Int32("partition", u.New.Partition).Msg("complete reassignment")
		}
	}
	return resp, nil
}

// checkAlterPartitionLocked is the AlterPartition matrix for one partition.
// It returns the state to commit (p itself when the proposal is already the
// committed state) or the error code.
func (c *Controller) checkAlterPartitionLocked(leader int32, p store.Partition, item *replicadv1.AlterPartitionItem) (replicadv1.ErrorCode, store.Partition) {
	newISR := isrOf(item)
	// A retry of a change this controller committed, whose answer was lost:
	// it is answered with the committed state before any fencing check, so
	// retries stay idempotent however the partition moved on meanwhile (a
	// newer leader epoch with the same ISR, say). Fenced first, the leader
	// would hear FENCED_LEADER_EPOCH for an ISR the controller holds. The
	// answer is only the committed state: the leader compares its leader
	// epoch before taking it. (Kafka's equalsAllowStalePartitionEpoch,
	// checked first "to maintain idempotency".)
	if p.Leader == leader && sameMembers(newISR, p.ISR) &&
		item.GetLeaderEpoch() <= p.LeaderEpoch && item.GetPartitionEpoch() <= p.PartitionEpoch {
		return replicadv1.ErrorCode_ERROR_CODE_NONE, p
	}
	switch {
	case p.Leader != leader:
		return replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER, p
	case item.GetLeaderEpoch() < p.LeaderEpoch:
		return replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, p
	case item.GetLeaderEpoch() > p.LeaderEpoch:
		return replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH, p
	case item.GetPartitionEpoch() != p.PartitionEpoch:
		return replicadv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION, p
	}
	if len(newISR) == 0 || !slices.Contains(newISR, leader) {
		return replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, p
	}
	seen := make(map[int32]bool, len(newISR))
	for _, be := range item.GetNewIsr() {
		id := be.GetBrokerId()
		if seen[id] || !slices.Contains(p.Replicas, id) {
			return replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, p
		}
		seen[id] = true
		if slices.Contains(p.ISR, id) {
			continue // not joining: already a member
		}
		bs, ok := c.brokers[id]
		if !ok || bs.info.Fenced || bs.shuttingDown || bs.replicaOffline(keyOf(p)) {
			// KIP-841: a fenced or stopping broker may not join the ISR;
			// nor may a replica its broker reports offline.
			return replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA, p
		}
		if e := be.GetBrokerEpoch(); e >= 0 && e != bs.info.Epoch {
			// The leader saw an earlier incarnation catch up, not this one.
			return replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, p
		}
	}
	if sameMembers(newISR, p.ISR) {
		return replicadv1.ErrorCode_ERROR_CODE_NONE, p
	}
	next := withIsr(p, newISR, c.minIsrLocked(p))
	next.PartitionEpoch++
	return replicadv1.ErrorCode_ERROR_CODE_NONE, next
}

// refreshLeaderLocked sends leader a LeaderAndIsr of the committed state of
// parts, at their current leader epoch: a broker takes a LeaderAndIsr with
// the same leader and leader epoch and a newer partition epoch as its ISR
// (core's isRefresh).
func (c *Controller) refreshLeaderLocked(ctx context.Context, leader int32, parts []store.Partition) {
	bs := c.brokers[leader]
	if len(parts) == 0 || !bs.reachable() {
		return
	}
	states := make([]*replicadv1.PartitionState, len(parts))
	for i, p := range parts {
		states[i] = c.stateProto(p, false)
	}
	bs.queue.LeaderAndIsrContext(ctx, states, c.leadersOfLocked(states))
}

// commitISRLocked persists ISR-only changes. Unlike leadership changes they
// need no LeaderAndIsr: the leader proposed them and learns the outcome from
// the answer; the other brokers get an UpdateMetadata.
func (c *Controller) commitISRLocked(ctx context.Context, updates []store.PartitionUpdate) ([]int32, error) {
	if len(updates) == 0 {
		return nil, nil
	}
	// The broker's request deadline must not cut the write short: it may
	// land all the same, and the leader's retry would then be refused as
	// stale (storeCtx).
	sctx, cancel := c.storeCtx(ctx)
	err := c.cfg.Store.UpdatePartitions(sctx, updates)
	cancel()
	if err != nil {
		return nil, c.writeFailedLocked(ctx, "ISR change not stored", err)
	}
	// ISR-only: no leader changes.
	c.counters.stateChanges.Add(int64(len(updates)))
	states := make([]*replicadv1.PartitionState, len(updates))
	for i, u := range updates {
		c.setPartLocked(u.New.Clone())
		states[i] = c.stateProto(u.New, false)
		c.log.Info().Str("topic", u.New.Topic).Int32("partition", u.New.Partition).Ints32("isr", u.New.ISR).
			Int32("partition_epoch", u.New.PartitionEpoch).Msg("ISR change committed")
	}
	live := c.liveBrokersLocked()
	for _, bs := range c.brokers {
		if bs.reachable() {
			bs.queue.UpdateMetadataContext(ctx, live, states)
		}
	}
	return nil, nil
}

func isrOf(item *replicadv1.AlterPartitionItem) []int32 {
	out := make([]int32, 0, len(item.GetNewIsr()))
	for _, be := range item.GetNewIsr() {
		out = append(out, be.GetBrokerId())
	}
	return out
}

// sameMembers reports whether a and b hold the same ids, in any order.
func sameMembers(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.Sort(sa)
	slices.Sort(sb)
	return slices.Equal(sa, sb)
}
