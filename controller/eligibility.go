package controller

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/topicconfig"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Who may lead a partition or join its ISR, replica by replica.

// eligibleLocked reports whether broker id may lead or join an ISR at all:
// it is registered, not fenced, and not shutting down.
func (c *Controller) eligibleLocked(id int32) bool {
	bs, ok := c.brokers[id]
	return ok && !bs.info.Fenced && !bs.shuttingDown
}

// eligibleForLocked is eligibleLocked for the replicas of one partition: a
// broker whose replica of it is offline (its log dir failed, or it answered
// STORAGE_ERROR) can neither lead it nor be in its ISR.
func (c *Controller) eligibleForLocked(k partitionKey) func(int32) bool {
	return func(id int32) bool {
		return c.eligibleLocked(id) && !c.brokers[id].replicaOffline(k)
	}
}

// minIsrLocked is the effective min.insync.replicas of p as its possible
// leaders apply it: the topic's min.insync.replicas when it sets one, else
// the smallest --min-insync-replicas any of its replicas registered with (a
// broker that did not say counts as 1), capped at the replica count. The
// ELR rests on leaders not moving the HW under it, so the controller must
// never assume a larger minimum than a leader uses: while a raise of the
// topic's value travels to the brokers, the old one counts (the topic
// config's MinIsrFloor, stored with the raise so that a controller taking
// over honours it too).
func (c *Controller) minIsrLocked(p store.Partition) int {
	return c.minIsrWithLocked(p, c.brokerFlagLocked)
}

// minIsrWithLocked is minIsrLocked with flag as each replica's
// --min-insync-replicas: registerBroker asks what a registration would
// make it before storing one.
func (c *Controller) minIsrWithLocked(p store.Partition, flag func(int32) int) int {
	cfg := c.configs[p.Topic]
	if v, ok := cfg.Configs[topicconfig.MinInsyncReplicas]; ok {
		n, err := strconv.Atoi(v)
		if err == nil && n >= 1 {
			if cfg.MinIsrFloor > 0 {
				n = min(n, cfg.MinIsrFloor)
			}
			return effectiveMinIsr(n, len(p.Replicas))
		}
	}
	m := c.brokerMinIsrWithLocked(p, flag)
	if cfg.MinIsrFloor > 0 {
		m = min(m, cfg.MinIsrFloor)
	}
	return m
}

// brokerFlagLocked is broker id's registered --min-insync-replicas (1 when
// it did not say or is unknown).
func (c *Controller) brokerFlagLocked(id int32) int {
	if bs, ok := c.brokers[id]; ok && bs.info.MinInsyncReplicas > 0 {
		return int(bs.info.MinInsyncReplicas)
	}
	return 1
}

// brokerMinIsrLocked is p's effective min.insync.replicas by its replicas'
// --min-insync-replicas alone.
func (c *Controller) brokerMinIsrLocked(p store.Partition) int {
	return c.brokerMinIsrWithLocked(p, c.brokerFlagLocked)
}

func (c *Controller) brokerMinIsrWithLocked(p store.Partition, flag func(int32) int) int {
	minIsr := 0
	for _, r := range p.Replicas {
		if m := flag(r); minIsr == 0 || m < minIsr {
			minIsr = m
		}
	}
	return effectiveMinIsr(minIsr, len(p.Replicas))
}

// replicaOffline reports whether the broker said its replica of k is
// offline: in its last heartbeat, or by answering a LeaderAndIsr for it
// with STORAGE_ERROR. A nil broker has no replicas offline.
func (bs *brokerState) replicaOffline(k partitionKey) bool {
	if bs == nil {
		return false
	}
	_, reported := bs.offline[k]
	_, refused := bs.storageErrors[k]
	return reported || refused
}

// setOfflineLocked replaces the replicas broker bs reports offline (its
// heartbeat carries them all) and moves leadership and ISR membership of
// those replicas away (KIP-858's offline log dirs, by partition). It
// reports whether anything was newly offline.
func (c *Controller) setOfflineLocked(ctx context.Context, bs *brokerState, reported []*replicadv1.PartitionRef) {
	next := make(map[partitionKey]struct{}, len(reported))
	var fresh []partitionKey
	for _, r := range reported {
		k := partitionKey{r.GetTopic(), r.GetPartition()}
		next[k] = struct{}{}
		if !bs.replicaOffline(k) {
			fresh = append(fresh, k)
		}
	}
	bs.offline = next
	if len(fresh) > 0 {
		c.log.Warn().Int32("broker", bs.info.ID).Int("partitions", len(fresh)).Str("topic", fresh[0].topic).
			Int32("partition", fresh[0].partition).Msg("broker reports offline replicas")
	}
	c.moveOfflineReplicasLocked(ctx, bs, "offline replicas in the broker's heartbeat")
}

// storageOutcomes sorts the partitions of a LeaderAndIsr answer: failed,
// refused with STORAGE_ERROR; healthy, taken (NONE).
func storageOutcomes(resp *replicadv1.LeaderAndIsrResponse) (failed, healthy []partitionKey) {
	for _, pe := range resp.GetPartitionErrors() {
		k := partitionKey{pe.GetTopic(), pe.GetPartition()}
		switch pe.GetErrorCode() {
		case replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR:
			failed = append(failed, k)
		case replicadv1.ErrorCode_ERROR_CODE_NONE:
			healthy = append(healthy, k)
		}
	}
	return failed, healthy
}

// noteStorageOutcomes handles a LeaderAndIsr answer of broker id's
// incarnation epoch. The partitions it refused with STORAGE_ERROR are
// offline on the broker, and moved away, until it takes a LeaderAndIsr for
// them again or registers again: a replica in a failed log dir answers
// STORAGE_ERROR to every one, while one that refused to lead a damaged log
// takes the next, as a follower, once it repaired it (core's
// repairDamagedLog), and may then rejoin the ISR. It runs on its own
// goroutine: the broker queue that got the answer must not wait for the
// controller's lock. Two answers' goroutines may run out of order; either
// way the replica is at worst kept offline until its next answer, or
// offered leadership that it refuses again: the broker, not this mark,
// guards its data.
func (c *Controller) noteStorageOutcomes(id int32, epoch int64, failed, healthy []partitionKey) {
	c.lock()
	defer c.unlock()
	bs, found := c.brokers[id]
	if !c.active || !found || bs.info.Epoch != epoch || bs.info.Fenced {
		return
	}
	for _, k := range healthy {
		if _, ok := bs.storageErrors[k]; ok {
			delete(bs.storageErrors, k)
			c.log.Info().Int32("broker", id).Str("topic", k.topic).Int32("partition", k.partition).
				Msg("broker took a LeaderAndIsr for a replica it had refused with STORAGE_ERROR: it may rejoin the ISR")
		}
	}
	bs.refusing.Store(len(bs.storageErrors) > 0)
	if len(failed) == 0 {
		return
	}
	ctx, span := c.tracer.Start(context.Background(), "Controller.handleStorageErrors", trace.WithAttributes(
		attribute.Int("replicad.broker", int(id)), attribute.Int64("replicad.broker_epoch", epoch),
		attribute.Int("replicad.partitions", len(failed))))
	defer span.End()
	if bs.storageErrors == nil {
		bs.storageErrors = make(map[partitionKey]struct{})
	}
	for _, k := range failed {
		bs.storageErrors[k] = struct{}{}
	}
	bs.refusing.Store(true)
	c.log.Warn().Int32("broker", id).Int("partitions", len(failed)).Str("topic", failed[0].topic).Int32("partition", failed[0].partition).
		Msg("broker answered STORAGE_ERROR: its replicas are offline")
	c.moveOfflineReplicasLocked(ctx, bs, "STORAGE_ERROR in the broker's LeaderAndIsr answer")
}

// moveOfflineReplicasLocked moves leadership and ISR membership away from
// bs's offline replicas, in one transaction, as a fencing does for a whole
// broker. A failed store write is retried at the broker's next heartbeat,
// which reports the replicas again.
func (c *Controller) moveOfflineReplicasLocked(ctx context.Context, bs *brokerState, reason string) {
	// Only the broker's offline replicas are looked at: this runs at every
	// heartbeat, and a controller may hold many partitions.
	keys := make([]partitionKey, 0, len(bs.offline)+len(bs.storageErrors))
	for k := range bs.offline {
		keys = append(keys, k)
	}
	for k := range bs.storageErrors {
		if _, dup := bs.offline[k]; !dup {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b partitionKey) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	var updates []store.PartitionUpdate
	for _, k := range keys {
		p, ok := c.parts[k]
		if !ok || (p.Leader != bs.info.ID && !slices.Contains(p.ISR, bs.info.ID)) {
			continue
		}
		next, _ := moveAway(p, bs.info.ID, c.eligibleForLocked(k), c.minIsrLocked(p))
		if p.Leader == bs.info.ID && next.Leader == store.NoLeader && c.cfg.UncleanLeaderElection {
			if l := c.uncleanLeaderLocked(ctx, next); l != store.NoLeader {
				next = withUncleanLeader(next, l)
			}
		}
		updates = append(updates, update(p, next))
	}
	if len(updates) == 0 {
		return
	}
	ctx, span := c.tracer.Start(ctx, "Controller.moveOfflineReplicas", trace.WithAttributes(
		attribute.Int("replicad.broker", int(bs.info.ID)), attribute.String("replicad.reason", reason),
		attribute.Int("replicad.partitions", len(updates))))
	defer span.End()
	if _, err := c.commitLocked(ctx, updates, nil); err != nil {
		span.RecordError(err)
		c.log.Error().Err(err).Int32("broker", bs.info.ID).Msg("move leadership and ISR membership away from offline replicas")
		return
	}
	c.log.Info().Int32("broker", bs.info.ID).Int("partitions", len(updates)).Str("reason", reason).
		Msg("moved leadership and ISR membership away from offline replicas")
}
