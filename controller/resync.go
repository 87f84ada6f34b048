package controller

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// DefaultStoreTimeout bounds each store write of the controller (see
// Config.StoreTimeout).
const DefaultStoreTimeout = 5 * time.Second

// storeCtx is the context of one store write made for the decision in ctx:
// its trace, but a deadline of the controller's own, never the caller's. A
// write cut short by a broker's request deadline may still land (etcd
// commits what it has accepted); cutting it short only makes its outcome
// unknown, for no gain.
func (c *Controller) storeCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.cfg.StoreTimeout)
}

// writeFailedLocked handles a failed store write: a lost election stops this
// controller; a conflict, or an error that leaves the outcome unknown (the
// write may have landed), makes the controller read the store back into its
// memory and tell the brokers what changed (resyncLocked), so that its next
// compare-and-set starts from what is stored instead of conflicting until
// a restart. It returns err.
func (c *Controller) writeFailedLocked(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, store.ErrNotLeader) {
		c.signalLost()
		return err
	}
	if store.IsDefinite(err) && !errors.Is(err, store.ErrConflict) {
		return err
	}
	c.resyncLocked(ctx, what, err)
	return err
}

// resyncRetry is how long after a failed re-read the next is tried.
const resyncRetry = time.Second

// resyncLocked reads partitions, topic configs, pending deletions and
// brokers back from the store, puts what differs from memory in memory,
// and announces it: LeaderAndIsr and UpdateMetadata for the repaired
// partitions (their replicas may never have heard of a state the store
// holds), StopReplica for replicas a stored state removed, deletions for
// a topic found deleted. A read that fails leaves resyncPending, retried by
// the periodic check (reconcile).
func (c *Controller) resyncLocked(ctx context.Context, cause string, cerr error) {
	ctx, span := c.tracer.Start(ctx, "Controller.resync", trace.WithAttributes(
		attribute.String("replicad.reason", cause)))
	defer span.End()
	if cerr != nil {
		span.SetAttributes(attribute.String("replicad.store_error", cerr.Error()))
	}
	c.counters.resyncs.Add(1)
	rctx, cancel := c.storeCtx(ctx)
	defer cancel()
	parts, err := c.cfg.Store.Partitions(rctx)
	var configs map[string]store.TopicConfig
	var deleted []store.DeletedTopic
	var brokers []store.Broker
	if err == nil {
		configs, err = c.cfg.Store.TopicConfigs(rctx)
	}
	if err == nil {
		deleted, err = c.cfg.Store.DeletedTopics(rctx)
	}
	if err == nil {
		brokers, err = c.cfg.Store.Brokers(rctx)
	}
	var throttle int64
	if err == nil {
		throttle, err = c.cfg.Store.ReplicationThrottle(rctx)
	}
	if err != nil {
		if errors.Is(err, store.ErrNotLeader) {
			c.signalLost()
		}
		c.resyncPending, c.resyncRetryAt = true, c.cfg.Clock.Now().Add(resyncRetry)
		span.RecordError(err)
		span.SetStatus(codes.Error, "re-read failed; retried")
		c.log.Error().Err(err).Str("reason", cause).Msg("cannot re-read the store after a failed write; memory may be behind it (retried)")
		return
	}
	c.resyncPending = false

	// Brokers: a fencing that landed is finished. A registration that
	// landed unanswered is not taken: the broker retries it and gets
	// another epoch (the controller fenced its previous life before
	// writing it, so nothing in memory needs the stored one), and a new
	// controller would give it a session and fence it if it never does.
	var brokersRepaired []int32
	for _, b := range brokers {
		bs, ok := c.brokers[b.ID]
		if !ok || bs.info.Epoch != b.Epoch || !b.Fenced || bs.info.Fenced {
			continue
		}
		// The move away is retried by the session check (movePending).
		bs.info, bs.shuttingDown, bs.shutDown, bs.movePending = b, false, false, true
		c.closeQueueLocked(bs)
		c.log.Warn().Int32("broker", b.ID).Int64("broker_epoch", b.Epoch).Str("reason", "found fenced in the store after a failed write").
			Msg("broker fenced")
		brokersRepaired = append(brokersRepaired, b.ID)
	}

	// Topic configs.
	var configsRepaired []string
	for topic, stored := range configs {
		cur, ok := c.configs[topic]
		if ok && cur.Version == stored.Version && maps.Equal(cur.Configs, stored.Configs) {
			continue
		}
		// The stored config carries its min ISR floor (min_isr.go): taking it
		// whole keeps a raise found stored protected until the brokers have it.
		c.configs[topic] = stored
		configsRepaired = append(configsRepaired, topic)
	}

	// Partitions.
	stored := make(map[partitionKey]store.Partition, len(parts))
	for _, p := range parts {
		stored[keyOf(p)] = p
		if _, ok := c.configs[p.Topic]; !ok {
			c.configs[p.Topic] = store.TopicConfig{} // stored before topic configs: version 0
		}
	}
	var changes []partitionChange
	var announce []store.Partition
	newReplicas := make(map[partitionKey][]int32)
	var stops []store.Partition // the stored states that removed replicas memory had
	var removedFrom [][]int32
	for _, p := range parts {
		k := keyOf(p)
		old, had := c.parts[k]
		if had && samePartition(old, p) {
			if slices.Contains(configsRepaired, p.Topic) {
				announce = append(announce, p)
			}
			continue
		}
		if !had && p.PartitionEpoch == 0 {
			// Created unanswered: no replica has its log yet.
			newReplicas[k] = slices.Clone(p.Replicas)
			if p.Partition == 0 {
				c.topicsCreated++
			}
		}
		c.setPartLocked(p.Clone())
		changes = append(changes, partitionChange{old: old, hadOld: had, new: p})
		announce = append(announce, p)
		if had {
			gone := slices.DeleteFunc(slices.Clone(old.Replicas), func(r int32) bool { return slices.Contains(p.Replicas, r) })
			if len(gone) > 0 {
				stops = append(stops, p)
				removedFrom = append(removedFrom, gone)
			}
		}
	}
	var dropped []string
	for k, p := range c.parts {
		if _, ok := stored[k]; !ok {
			c.deletePartLocked(k) // its topic was deleted unanswered
			dropped = append(dropped, p.Topic+"-"+strconv.Itoa(int(p.Partition)))
		}
	}
	for topic := range c.configs {
		if _, ok := configs[topic]; !ok && !slices.ContainsFunc(parts, func(p store.Partition) bool { return p.Topic == topic }) {
			delete(c.configs, topic)
		}
	}
	slices.Sort(dropped)

	// Deletions pending.
	before := c.deleted
	c.deleted = make(map[string]store.DeletedTopic, len(deleted))
	newDeletions := false
	for _, d := range deleted {
		c.deleted[d.ID] = d
		if _, ok := before[d.ID]; !ok {
			newDeletions = true
		}
	}

	throttleRepaired := throttle != c.throttle
	if throttleRepaired {
		c.setThrottleLocked(throttle)
	}

	if len(changes) == 0 && len(brokersRepaired) == 0 && len(configsRepaired) == 0 && len(dropped) == 0 && !newDeletions && !throttleRepaired {
		span.SetAttributes(attribute.Int("replicad.partitions_repaired", 0))
		c.log.Info().Str("reason", cause).Msg("store re-read after a failed write: memory agreed with it")
		return
	}
	tracePartitionChanges(ctx, "partition state repaired", changes)
	c.counters.repaired.Add(int64(len(changes)))
	// Every live broker gets an UpdateMetadata (with the live brokers and
	// the throttle, which each carries), even with no partition repaired.
	c.announceLocked(ctx, announce, newReplicas)
	for i, p := range stops {
		for _, r := range removedFrom[i] {
			if bs := c.brokers[r]; bs.reachable() {
				bs.queue.StopReplicaContext(ctx, []*replicadv1.StopReplicaPartition{{Topic: p.Topic, Partition: p.Partition,
					LeaderEpoch: p.LeaderEpoch, DeletePartition: true, TopicId: p.TopicID}})
			}
		}
	}
	if newDeletions {
		for _, id := range c.sortedBrokerIDsLocked() {
			c.sendPendingDeletionsLocked(ctx, c.brokers[id])
		}
	}
	repaired := make([]string, len(changes))
	for i, ch := range changes {
		repaired[i] = ch.new.Topic + "-" + strconv.Itoa(int(ch.new.Partition))
	}
	span.SetAttributes(attribute.Int("replicad.partitions_repaired", len(changes)), attribute.StringSlice("replicad.repaired", repaired),
		attribute.IntSlice("replicad.brokers", toInts(brokersRepaired)), attribute.StringSlice("replicad.topics", configsRepaired))
	c.log.Warn().Str("reason", cause).Strs("partitions_repaired", repaired).Strs("partitions_dropped", dropped).
		Ints32("brokers_repaired", brokersRepaired).Strs("topic_configs_repaired", configsRepaired).
		Bool("throttle_repaired", throttleRepaired).Int64("throttle_bytes_per_sec", c.throttle).
		Msg("store re-read after a failed write: memory was behind it; repaired and re-announced")
}

// samePartition reports whether a and b are the same state.
func samePartition(a, b store.Partition) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && a.TopicID == b.TopicID && a.Leader == b.Leader &&
		a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch && slices.Equal(a.ISR, b.ISR) &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.AddingReplicas, b.AddingReplicas) &&
		slices.Equal(a.RemovingReplicas, b.RemovingReplicas) && slices.Equal(a.ELR, b.ELR) && slices.Equal(a.LastKnownELR, b.LastKnownELR)
}

// reconcile is the periodic check that settles what a failed write left
// undone: the store re-read when the last one failed, and every pending
// reassignment driven to completion from the state held (a completion
// write that failed, a controller that died between a reassignment's ISR
// change and its completion, a target that was not eligible then).
func (c *Controller) reconcile(ctx context.Context) {
	c.lock()
	defer c.unlock()
	if !c.active {
		return
	}
	now := c.cfg.Clock.Now()
	if c.resyncPending && !now.Before(c.resyncRetryAt) {
		c.resyncLocked(ctx, "retrying a re-read that failed", nil)
	}
	if !now.Before(c.reassignRetryAt) {
		c.driveReassignmentsLocked(ctx, "periodic check")
	}
}

// driveReassignmentsLocked completes every reassignment whose added
// replicas are all in the ISR (maybeCompleteReassignmentLocked). A failed
// completion is retried after a backoff.
func (c *Controller) driveReassignmentsLocked(ctx context.Context, why string) {
	var due []partitionKey
	for k := range c.moving {
		if reassignmentDue(c.parts[k]) {
			due = append(due, k)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, func(a, b partitionKey) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
	})
	ctx, span := c.tracer.Start(ctx, "Controller.completeReassignments", trace.WithAttributes(
		attribute.String("replicad.reason", why), attribute.Int("replicad.partitions", len(due))))
	defer span.End()
	for _, k := range due {
		if err := c.maybeCompleteReassignmentLocked(ctx, k); err != nil {
			c.reassignFailures++
			backoff := min(c.sessionCheckInterval()<<min(c.reassignFailures-1, 10), maxMoveRetryBackoff)
			c.reassignRetryAt = c.cfg.Clock.Now().Add(backoff)
			span.RecordError(err)
			span.SetStatus(codes.Error, "completion failed; retried")
			c.log.Error().Err(err).Str("topic", k.topic).Int32("partition", k.partition).Str("reason", why).
				Dur("retry_in", backoff).Msg("complete reassignment (retried)")
			return
		}
	}
	c.reassignFailures, c.reassignRetryAt = 0, time.Time{}
}

// reassignmentDue reports whether p's reassignment has every added replica
// in the ISR: it waits only for its completion.
func reassignmentDue(p store.Partition) bool {
	if len(p.AddingReplicas) == 0 && len(p.RemovingReplicas) == 0 {
		return false
	}
	for _, r := range p.AddingReplicas {
		if !slices.Contains(p.ISR, r) {
			return false
		}
	}
	return true
}
