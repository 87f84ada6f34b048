package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/topicconfig"
)

// Changes of min.insync.replicas and the ELR (issue 19, paths 1 and 2).
//
// An ELR member holds every committed record only because the leader does
// not commit while its ISR is below min ISR. When a partition's effective
// min ISR falls, an ISR that is now at the new minimum commits records the
// ELR members lack: they must leave the ELR (and the last known ELR) before
// any leader can commit under the lower value, that is before it can learn
// it. So:
//
//   - a topic's min.insync.replicas lowered or deleted: the ELR of its
//     partitions is cleared in the same store write as the config
//     (store.AlterTopicConfig);
//   - a broker registering with a lower --min-insync-replicas: the ELR is
//     cleared in a write before the registration is stored (the broker
//     cannot lead, so apply its flag, before it is registered);
//   - a reassignment (or any other partition change) whose replicas lower
//     the minimum: commitLocked clears the ELR in the same write;
//   - a crash between two of those writes, or a store written by an older
//     controller: activation clears every stale ELR before electing anyone.
//
// A raise is the opposite danger: leaders that have not heard of it still
// commit under the old value, so the controller must not keep replicas in
// the ELR on the strength of the new one. The old value is stored as the
// topic config's MinIsrFloor in the same write as the raise, and cleared
// by a later write once every reachable broker took the new config (a
// fenced or unregistered broker gets it in the LeaderAndIsr that lets it
// lead again). Nothing that decides eligibility lives only in memory.

// withoutStaleElrLocked is updates with the ELR cleared wherever the new
// state's ISR is at its min ISR or more (see withoutStaleElr): every commit
// passes through it, so no write keeps an ELR that a leader may commit
// without, whatever made the minimum fall.
func (c *Controller) withoutStaleElrLocked(updates []store.PartitionUpdate) []store.PartitionUpdate {
	var out []store.PartitionUpdate
	for i, u := range updates {
		next, changed := withoutStaleElr(u.New, c.minIsrLocked(u.New))
		if !changed {
			continue
		}
		if out == nil {
			out = slices.Clone(updates)
		}
		out[i].New = next
		c.log.Info().Str("topic", next.Topic).Int32("partition", next.Partition).Ints32("isr", next.ISR).
			Ints32("cleared_elr", u.New.ELR).Ints32("cleared_last_known_elr", u.New.LastKnownELR).
			Int("min_isr", c.minIsrLocked(u.New)).Msg("ELR cleared: the ISR is at min ISR and may commit without it")
	}
	if out == nil {
		return updates
	}
	return out
}

// staleElrUpdatesLocked are the changes that clear the ELR of the
// partitions (of topic, or every one when topic is empty) whose ISR is at
// minIsr(p) or more, at the next partition epoch.
func (c *Controller) staleElrUpdatesLocked(topic string, minIsr func(store.Partition) int) []store.PartitionUpdate {
	var updates []store.PartitionUpdate
	for p := range c.allPartitionsLocked() {
		if topic != "" && p.Topic != topic {
			continue
		}
		if next, changed := withoutStaleElr(p, minIsr(p)); changed {
			next.PartitionEpoch++
			updates = append(updates, update(p, next))
		}
	}
	return updates
}

// clearStaleElrLocked commits staleElrUpdatesLocked, traced and logged as a
// change of its own.
func (c *Controller) clearStaleElrLocked(ctx context.Context, reason string, updates []store.PartitionUpdate) error {
	if len(updates) == 0 {
		return nil
	}
	ctx, span := c.tracer.Start(ctx, "Controller.clearStaleElr", trace.WithAttributes(
		attribute.String("replicad.reason", reason), attribute.Int("replicad.partitions", len(updates))))
	defer span.End()
	if _, err := c.commitLocked(ctx, updates, nil); err != nil {
		span.RecordError(err)
		return fmt.Errorf("clear stale ELRs (%s): %w", reason, err)
	}
	for _, u := range updates {
		c.log.Warn().Str("topic", u.New.Topic).Int32("partition", u.New.Partition).Ints32("isr", u.New.ISR).
			Int32("partition_epoch", u.New.PartitionEpoch).Str("reason", reason).
			Msg("min ISR fell: the ELR is cleared, its members may lack what the ISR commits from now on")
	}
	return nil
}

// appliedLocked takes into memory, traces and announces partition changes
// that a store write other than commitLocked's stored (AlterTopicConfig).
func (c *Controller) appliedLocked(ctx context.Context, event string, updates []store.PartitionUpdate) {
	if len(updates) == 0 {
		return
	}
	for _, u := range updates {
		old := c.parts[keyOf(u.New)]
		c.log.Warn().Str("topic", u.New.Topic).Int32("partition", u.New.Partition).Ints32("isr", u.New.ISR).
			Ints32("cleared_elr", old.ELR).Ints32("cleared_last_known_elr", old.LastKnownELR).
			Int32("partition_epoch", u.New.PartitionEpoch).Msg(event)
	}
	c.announceLocked(ctx, c.takeStoredLocked(ctx, updates), nil)
}

// registrationMinIsrLocked is p's min ISR once broker b is registered with
// its --min-insync-replicas.
func (c *Controller) registrationMinIsrLocked(b store.Broker) func(store.Partition) int {
	return func(p store.Partition) int {
		return c.minIsrWithLocked(p, func(id int32) int {
			if id == b.ID {
				return max(1, int(b.MinInsyncReplicas))
			}
			return c.brokerFlagLocked(id)
		})
	}
}

// nextMinIsrFloor is the floor to store with a change of a topic's
// min.insync.replicas from cur: the value before it (1 when the topic had
// none: leaders then use their flags, at least 1), or the floor still
// pending when that is lower. When min.insync.replicas does not change, the
// pending floor stays.
func nextMinIsrFloor(cur store.TopicConfig, next map[string]string) int {
	old, ok := cur.Configs[topicconfig.MinInsyncReplicas]
	if old == next[topicconfig.MinInsyncReplicas] && ok == hasKey(next, topicconfig.MinInsyncReplicas) {
		return cur.MinIsrFloor
	}
	floor := 1
	if n, err := parsePositive(old); err == nil {
		floor = n
	}
	if cur.MinIsrFloor > 0 {
		floor = min(floor, cur.MinIsrFloor)
	}
	return floor
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}

func parsePositive(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("not a positive number: %q", s)
	}
	return n, nil
}

// flushAllLocked is a wait, to run without the lock, until every reachable
// broker (stopping ones too: they may still lead) took everything queued
// for it so far, or SendTimeout passes. It reports whether all did.
func (c *Controller) flushAllLocked() func(ctx context.Context) bool {
	var ids []int32
	for _, id := range c.sortedBrokerIDsLocked() {
		if c.brokers[id].reachable() {
			ids = append(ids, id)
		}
	}
	queues := make([]interface{ Flush(context.Context) error }, 0, len(ids))
	for _, id := range ids {
		queues = append(queues, c.brokers[id].queue)
	}
	return func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, c.cfg.SendTimeout)
		defer cancel()
		for _, q := range queues {
			if q.Flush(ctx) != nil {
				return false
			}
		}
		return true
	}
}

// clearMinIsrFloorWhenDelivered clears the min ISR floor of topic's config
// at version once every reachable broker took everything queued so far
// (which includes that version: it is queued to every broker before the
// floor is looked at), in a store write of its own, if this controller is
// still active at epoch and the config is still at version.
func (c *Controller) clearMinIsrFloorWhenDelivered(ctx context.Context, topic string, version int64, epoch int32) {
	c.lock()
	if !c.active || c.epoch != epoch {
		c.unlock()
		return
	}
	wait := c.flushAllLocked()
	if c.configDelivered != nil {
		delivered := c.configDelivered()
		wait = func(context.Context) bool { return delivered }
	}
	c.unlock()
	if !wait(ctx) {
		return // tried again at a later session check
	}
	c.lock()
	defer c.unlock()
	cur, ok := c.configs[topic]
	if !c.active || c.epoch != epoch || !ok || cur.Version != version || cur.MinIsrFloor == 0 {
		return
	}
	ctx, span := c.tracer.Start(ctx, "Controller.clearMinIsrFloor", trace.WithAttributes(
		attribute.String("replicad.topic", topic), attribute.Int64("replicad.config_version", version),
		attribute.Int("replicad.min_isr_floor", cur.MinIsrFloor)))
	defer span.End()
	next := cur.Clone()
	next.MinIsrFloor = 0
	if err := c.cfg.Store.AlterTopicConfig(ctx, topic, version, next, nil); err != nil {
		span.RecordError(err)
		c.log.Warn().Err(c.storeErr(err)).Str("topic", topic).Int64("config_version", version).
			Msg("clear the min ISR floor: tried again at a later session check")
		return
	}
	c.configs[topic] = next
	c.log.Info().Str("topic", topic).Int64("config_version", version).Int("min_isr_floor", cur.MinIsrFloor).
		Str("min_insync_replicas", next.Configs[topicconfig.MinInsyncReplicas]).
		Msg("every broker has the raised min.insync.replicas: the old value no longer counts for the ELR")
}

// retryMinIsrFloorClearsLocked starts, for every topic whose stored config
// still has a min ISR floor (a raise whose delivery was not confirmed, or
// one stored by an earlier controller), a clear once the brokers took
// everything; one at a time per topic.
func (c *Controller) retryMinIsrFloorClearsLocked(ctx context.Context) {
	for topic, cfg := range c.configs {
		if cfg.MinIsrFloor == 0 || c.floorClears[topic] {
			continue
		}
		if c.floorClears == nil {
			c.floorClears = make(map[string]bool)
		}
		c.floorClears[topic] = true
		epoch := c.epoch
		go func() {
			defer func() {
				c.lock()
				delete(c.floorClears, topic)
				c.unlock()
			}()
			c.clearMinIsrFloorWhenDelivered(ctx, topic, cfg.Version, epoch)
		}()
	}
}
