package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// adminError is an admin call's refusal: an error code and what to tell the
// user.
type adminError struct {
	code replicadv1.ErrorCode
	msg  string
}

func (e *adminError) Error() string { return e.msg }

func refuse(code replicadv1.ErrorCode, format string, args ...any) error {
	return &adminError{code: code, msg: fmt.Sprintf(format, args...)}
}

// createTopic assigns the partitions round-robin over the live brokers, so
// leaders spread evenly, persists the topic, and tells the replicas.
func (c *Controller) createTopic(ctx context.Context, topic string, partitions, rf int, configs map[string]string) ([]store.Partition, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.createTopic", trace.WithAttributes(
		attribute.String("replicad.topic", topic), attribute.Int("replicad.partitions", partitions),
		attribute.Int("replicad.replication_factor", rf)))
	defer span.End()
	c.lock()
	if !c.active {
		c.unlock()
		return nil, errNotController
	}
	var live []int32
	for _, id := range c.sortedBrokerIDsLocked() {
		if c.eligibleLocked(id) {
			live = append(live, id)
		}
	}
	if rf > len(live) {
		c.unlock()
		return nil, refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR,
			"replication factor %d is larger than the %d live brokers %s", rf, len(live), tp.IDList(live))
	}
	assignment := assignReplicas(live, partitions, rf, c.topicsCreated)
	if err := c.refuseCreateOverBudgetLocked(ctx, topic, rf, assignment); err != nil {
		c.unlock()
		return nil, err
	}
	id, err := newTopicID()
	if err != nil {
		c.unlock()
		return nil, err
	}
	parts := make([]store.Partition, partitions)
	for i, rs := range assignment {
		parts[i] = store.Partition{Topic: topic, TopicID: id, Partition: int32(i), Leader: rs[0], ISR: slices.Clone(rs), Replicas: rs}
	}
	configs = maps.Clone(configs)
	sctx, cancel := c.storeCtx(ctx)
	err = c.cfg.Store.CreateTopic(sctx, topic, parts, configs)
	cancel()
	if err != nil {
		if errors.Is(err, store.ErrExists) {
			if _, known := c.configs[topic]; !known {
				// Stored, but not in memory: an earlier create landed
				// unanswered.
				c.resyncLocked(ctx, "topic exists in the store only", err)
			}
			c.unlock()
			return nil, refuse(replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS, "topic %q already exists", topic)
		}
		err = c.writeFailedLocked(ctx, "topic creation not stored", err)
		c.unlock()
		return nil, err
	}
	c.topicsCreated++
	// Before the announcement: the partitions' first LeaderAndIsr carries
	// the configs, so no replica ever serves the topic without them.
	c.configs[topic] = store.TopicConfig{Version: 1, Configs: configs}
	newReplicas := make(map[partitionKey][]int32, len(parts))
	changes := make([]partitionChange, len(parts))
	for i, p := range parts {
		c.setPartLocked(p.Clone())
		newReplicas[keyOf(p)] = p.Replicas
		changes[i] = partitionChange{new: p}
	}
	tracePartitionChanges(ctx, "partition created", changes)
	c.counters.countCommitted(changes)
	touched := c.announceCreatedLocked(ctx, parts, newReplicas)
	c.unlock()
	c.log.Info().Str("topic", topic).Int("partitions", partitions).Int("replication_factor", rf).
		Str("configs", topicconfig.Format(configs)).Msg("topic created")
	c.waitDelivered(ctx, touched)
	return parts, nil
}

// announceCreatedLocked tells the replicas of a topic just created, in
// chunks of Config.SendBatch partitions with the lock released
// between two (a topic of 10,000 partitions RF 3 is 30,000 states to
// build and queue). The topic is stored whole, in one write, before: the
// chunks only split the telling. Each chunk tells the partitions' state
// when it is queued; a partition changed meanwhile was told by its own
// decision as well, and one whose topic was deleted (or deleted and
// created again) meanwhile is left out.
func (c *Controller) announceCreatedLocked(ctx context.Context, parts []store.Partition, newReplicas map[partitionKey][]int32) []int32 {
	chunk := c.sendBatch()
	var touched []int32
	// The LeaderAndIsr requests of every chunk, then the UpdateMetadata
	// ones, so that the broker queues merge each kind as for one call.
	for _, leaderAndIsr := range []bool{true, false} {
		for start := 0; start < len(parts); start += chunk {
			if (start > 0 || !leaderAndIsr) && !c.yieldLocked() {
				return touched
			}
			var states []store.Partition
			for _, p := range parts[start:min(start+chunk, len(parts))] {
				if cur, ok := c.parts[keyOf(p)]; ok && cur.TopicID == p.TopicID {
					states = append(states, cur)
				}
			}
			if len(states) == 0 {
				continue
			}
			for _, id := range c.announceKindLocked(ctx, states, newReplicas, leaderAndIsr) {
				if !slices.Contains(touched, id) {
					touched = append(touched, id)
				}
			}
		}
	}
	return touched
}

// deleteTopic removes the topic from the metadata, then has every replica
// stop and delete its log.
func (c *Controller) deleteTopic(ctx context.Context, topic string) error {
	ctx, span := c.tracer.Start(ctx, "Controller.deleteTopic", trace.WithAttributes(attribute.String("replicad.topic", topic)))
	defer span.End()
	c.lock()
	if !c.active {
		c.unlock()
		return errNotController
	}
	sctx, cancel := c.storeCtx(ctx)
	err := c.cfg.Store.DeleteTopic(sctx, topic)
	cancel()
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			if _, known := c.configs[topic]; known {
				// Gone from the store, not from memory: an earlier
				// delete landed unanswered.
				c.resyncLocked(ctx, "topic deleted in the store only", err)
			}
			c.unlock()
			return refuse(replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "topic %q does not exist", topic)
		}
		err = c.writeFailedLocked(ctx, "topic deletion not stored", err)
		c.unlock()
		return err
	}
	// The store recorded every replica as pending deletion; the ones that
	// are up are told now, the others when they register again.
	delete(c.configs, topic)
	deleted := store.Topic{Name: topic}
	for p := range c.allPartitionsLocked() {
		if p.Topic == topic {
			deleted.Partitions = append(deleted.Partitions, p)
			c.deletePartLocked(keyOf(p))
		}
	}
	d, pending := store.NewDeletedTopic(deleted)
	var touched []int32
	if pending {
		c.deleted[d.ID] = d
		for _, id := range c.sortedBrokerIDsLocked() {
			if c.sendPendingDeletionsLocked(ctx, c.brokers[id]) {
				touched = append(touched, id)
			}
		}
	}
	c.unlock()
	span.SetAttributes(attribute.String("replicad.topic_id", d.ID))
	c.log.Info().Str("topic", topic).Str("topic_id", d.ID).Msg("topic deleted: every replica deletes its log")
	c.waitDelivered(ctx, touched)
	return nil
}

// electLeader moves a partition's leadership to leader (or, when leader is
// nil, to the preferred replica: the first live ISR member in assignment
// order). Only a live ISR member may lead.
func (c *Controller) electLeader(ctx context.Context, topic string, partition int32, leader *int32) (store.Partition, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.electLeader", trace.WithAttributes(
		attribute.String("replicad.topic", topic), attribute.Int("replicad.partition", int(partition))))
	defer span.End()
	c.lock()
	p, err := c.partitionLocked(topic, partition)
	if err != nil {
		c.unlock()
		return p, err
	}
	eligible := c.eligibleForLocked(keyOf(p))
	target := cleanLeader(p, eligible)
	if leader != nil {
		target = *leader
		switch {
		case !slices.Contains(p.Replicas, target):
			c.unlock()
			return p, refuse(replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA, "broker %d is not a replica of %s-%d (replicas %s)", target, topic, partition, tp.IDList(p.Replicas))
		case !(slices.Contains(p.ISR, target) || slices.Contains(p.ELR, target)) || !eligible(target):
			c.unlock()
			return p, refuse(replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA, "broker %d is not a live ISR or ELR member of %s-%d (ISR %s, ELR %s)",
				target, topic, partition, tp.IDList(p.ISR), tp.IDList(p.ELR))
		}
	}
	if target == store.NoLeader {
		c.unlock()
		return p, refuse(replicadv1.ErrorCode_ERROR_CODE_ELIGIBLE_LEADERS_NOT_AVAILABLE, "no live ISR or ELR member of %s-%d (ISR %s, ELR %s)",
			topic, partition, tp.IDList(p.ISR), tp.IDList(p.ELR))
	}
	if target == p.Leader {
		c.unlock()
		return p, refuse(replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED, "broker %d already leads %s-%d", target, topic, partition)
	}
	next := withLeader(p, target)
	next.LeaderEpoch++
	next.PartitionEpoch++
	touched, err := c.commitLocked(ctx, []store.PartitionUpdate{update(p, next)}, nil)
	if err == nil {
		next = c.parts[keyOf(p)] // as stored: commitLocked may clear a stale ELR
	}
	c.unlock()
	if err != nil {
		return p, err
	}
	span.SetAttributes(attribute.Int("replicad.leader", int(target)), attribute.Int("replicad.leader_epoch", int(next.LeaderEpoch)))
	c.log.Info().Str("topic", topic).Int32("partition", partition).Int32("old_leader", p.Leader).Int32("leader", target).
		Int32("leader_epoch", next.LeaderEpoch).Msg("leader elected")
	c.waitDelivered(ctx, touched)
	return next, nil
}

// reassignPartition starts moving a partition to the target replicas (KIP-455):
// the replicas become target ∪ current, the added ones start as followers,
// and once they are all in the ISR maybeCompleteReassignmentLocked switches to
// the target and stops the removed ones.
func (c *Controller) reassignPartition(ctx context.Context, topic string, partition int32, target []int32) (store.Partition, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.reassignPartition", trace.WithAttributes(
		attribute.String("replicad.topic", topic), attribute.Int("replicad.partition", int(partition))))
	defer span.End()
	c.lock()
	p, err := c.partitionLocked(topic, partition)
	if err != nil {
		c.unlock()
		return p, err
	}
	if len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
		c.unlock()
		return p, refuse(replicadv1.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS, "%s-%d is already being reassigned to %v", topic, partition, targetOf(p))
	}
	for _, id := range target {
		if _, ok := c.brokers[id]; !ok {
			c.unlock()
			return p, refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, "broker %d has never registered", id)
		}
	}
	if slices.Equal(target, p.Replicas) {
		c.unlock()
		return p, nil
	}
	next := p.Clone()
	next.Replicas = slices.Clone(target)
	for _, r := range p.Replicas {
		if !slices.Contains(target, r) {
			next.Replicas = append(next.Replicas, r)
			next.RemovingReplicas = append(next.RemovingReplicas, r)
		}
	}
	for _, r := range target {
		if !slices.Contains(p.Replicas, r) {
			next.AddingReplicas = append(next.AddingReplicas, r)
		}
	}
	if err := c.refuseOverBudgetLocked(ctx, fmt.Sprintf("reassigning %s-%d to %v", topic, partition, target), [][]int32{next.AddingReplicas}); err != nil {
		c.unlock()
		return p, err
	}
	// The leader epoch rises so every replica, old and new, takes the new
	// replica list (a broker ignores a LeaderAndIsr at its current epoch).
	next.LeaderEpoch++
	next.PartitionEpoch++
	// Only the added replicas may create the log empty (is_new); the
	// others have it, and one whose log dir is offline must not start over.
	newReplicas := map[partitionKey][]int32{keyOf(next): next.AddingReplicas}
	touched, err := c.commitLocked(ctx, []store.PartitionUpdate{update(p, next)}, newReplicas)
	if err == nil {
		c.log.Info().Str("topic", topic).Int32("partition", partition).Ints32("from", p.Replicas).Ints32("to", target).
			Msg("reassignment started")
		err = c.maybeCompleteReassignmentLocked(ctx, keyOf(next))
	}
	current := c.parts[keyOf(next)]
	c.unlock()
	if err != nil {
		return p, err
	}
	c.waitDelivered(ctx, touched)
	return current, nil
}

// cancelReassignment stops the reassignment in flight of a partition
// (KIP-455's cancel, Kafka's PartitionReassignmentRevert): the replicas go
// back to the original ones (the current ones minus the adding ones, in
// their order), the ISR and ELR lose the adding ones, a leader among them
// hands over to an original ISR member, and the adding replicas stop and
// delete their logs. A cancel that would need an unclean election (no
// original replica left in the ISR) is refused, as Kafka refuses it when
// unclean election is off.
func (c *Controller) cancelReassignment(ctx context.Context, topic string, partition int32) (store.Partition, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.cancelReassignment", trace.WithAttributes(
		attribute.String("replicad.topic", topic), attribute.Int("replicad.partition", int(partition))))
	defer span.End()
	c.lock()
	p, err := c.partitionLocked(topic, partition)
	if err != nil {
		c.unlock()
		return p, err
	}
	if len(p.AddingReplicas) == 0 && len(p.RemovingReplicas) == 0 {
		c.unlock()
		return p, refuse(replicadv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS, "no reassignment of %s-%d is in progress (replicas %s)", topic, partition, tp.IDList(p.Replicas))
	}
	next, err := revertReassignment(p, c.eligibleForLocked(keyOf(p)))
	if err != nil {
		c.unlock()
		return p, err
	}
	touched, err := c.commitLocked(ctx, []store.PartitionUpdate{update(p, next)}, nil)
	if err != nil {
		c.unlock()
		return p, err
	}
	next = c.parts[keyOf(p)] // as stored: commitLocked may clear a stale ELR
	for _, r := range p.AddingReplicas {
		if bs := c.brokers[r]; bs.reachable() {
			bs.queue.StopReplicaContext(ctx, []*replicadv1.StopReplicaPartition{{Topic: p.Topic, Partition: p.Partition,
				LeaderEpoch: next.LeaderEpoch, DeletePartition: true, TopicId: p.TopicID}})
			touched = append(touched, r)
		}
	}
	c.unlock()
	span.SetAttributes(attribute.Int("replicad.leader", int(next.Leader)), attribute.Int("replicad.leader_epoch", int(next.LeaderEpoch)))
	c.log.Info().Str("topic", topic).Int32("partition", partition).Ints32("target", targetOf(p)).Ints32("replicas", next.Replicas).
		Ints32("stopped", p.AddingReplicas).Int32("leader", next.Leader).Msg("reassignment cancelled")
	c.waitDelivered(ctx, touched)
	return next, nil
}

// revertReassignment is p with its reassignment undone (see
// cancelReassignment), at the next leader and partition epochs.
func revertReassignment(p store.Partition, eligible func(int32) bool) (store.Partition, error) {
	adding := func(r int32) bool { return slices.Contains(p.AddingReplicas, r) }
	next := p.Clone()
	next.Replicas = slices.DeleteFunc(slices.Clone(p.Replicas), adding)
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), adding)
	next.ELR = slices.DeleteFunc(slices.Clone(p.ELR), adding)
	next.LastKnownELR = slices.DeleteFunc(slices.Clone(p.LastKnownELR), adding)
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	if len(next.ISR) == 0 {
		return p, refuse(replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA,
			"cancelling the reassignment of %s-%d would need an unclean election: no original replica of %s is in the ISR %s",
			p.Topic, p.Partition, tp.IDList(next.Replicas), tp.IDList(p.ISR))
	}
	if adding(p.Leader) || !eligible(p.Leader) {
		next = withLeader(next, cleanLeader(next, eligible))
	}
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, nil
}

// partitionLocked is the partition an admin call names, or why it cannot
// be acted on: this controller is not active, or the partition is unknown.
func (c *Controller) partitionLocked(topic string, partition int32) (store.Partition, error) {
	if !c.active {
		return store.Partition{}, errNotController
	}
	p, ok := c.parts[partitionKey{topic, partition}]
	if !ok {
		return store.Partition{}, refuse(replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "partition %s-%d does not exist", topic, partition)
	}
	return p, nil
}

// targetOf is the target assignment of a partition being reassigned.
func targetOf(p store.Partition) []int32 {
	return slices.DeleteFunc(slices.Clone(p.Replicas), func(r int32) bool { return slices.Contains(p.RemovingReplicas, r) })
}

// maybeCompleteReassignmentLocked finishes a reassignment whose added
// replicas are all in the ISR: replicas become the target, the ISR drops the
// removed ones, a removed leader hands over to a target ISR member, and the
// removed replicas stop and delete their logs.
func (c *Controller) maybeCompleteReassignmentLocked(ctx context.Context, k partitionKey) error {
	p, ok := c.parts[k]
	if !ok || (len(p.AddingReplicas) == 0 && len(p.RemovingReplicas) == 0) {
		return nil
	}
	for _, r := range p.AddingReplicas {
		if !slices.Contains(p.ISR, r) {
			return nil // still catching up
		}
	}
	target := targetOf(p)
	next := p.Clone()
	next.Replicas = target
	outsideTarget := func(r int32) bool { return !slices.Contains(target, r) }
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), outsideTarget)
	next.ELR = slices.DeleteFunc(slices.Clone(p.ELR), outsideTarget)
	next.LastKnownELR = slices.DeleteFunc(slices.Clone(p.LastKnownELR), outsideTarget)
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	if eligible := c.eligibleForLocked(k); !slices.Contains(target, p.Leader) || !eligible(p.Leader) {
		leader := cleanLeader(next, eligible)
		if leader == store.NoLeader {
			return nil // no target ISR member is live yet: the next ISR change, or the periodic check (reconcile), tries again
		}
		next = withLeader(next, leader)
	}
	next.LeaderEpoch++
	next.PartitionEpoch++
	if _, err := c.commitLocked(ctx, []store.PartitionUpdate{update(p, next)}, nil); err != nil {
		return err
	}
	for _, r := range p.RemovingReplicas {
		if bs := c.brokers[r]; bs.reachable() {
			bs.queue.StopReplicaContext(ctx, []*replicadv1.StopReplicaPartition{{Topic: p.Topic, Partition: p.Partition,
				LeaderEpoch: next.LeaderEpoch, DeletePartition: true, TopicId: p.TopicID}})
		}
	}
	c.log.Info().Str("topic", p.Topic).Int32("partition", p.Partition).Ints32("replicas", target).Int32("leader", next.Leader).
		Msg("reassignment completed")
	return nil
}

// clusterView is DescribeCluster's answer.
type clusterView struct {
	epoch      int32
	brokers    []brokerView
	partitions []store.Partition
	// offline are the replicas reported offline, by partition.
	offline map[partitionKey][]int32
	// deleted are the deletions pending.
	deleted []store.DeletedTopic
	// minIsr is each partition's effective min.insync.replicas, by index
	// in partitions.
	minIsr []int
}

type brokerView struct {
	info  store.Broker
	alive bool
}

func (c *Controller) describe() (clusterView, error) {
	c.lock()
	defer c.unlock()
	if !c.active {
		return clusterView{}, errNotController
	}
	v := clusterView{epoch: c.epoch, partitions: c.sortedPartitionsLocked(), deleted: c.deletedSnapshotLocked()}
	for _, id := range c.sortedBrokerIDsLocked() {
		bs := c.brokers[id]
		// A broker done with its controlled shutdown is stopping: not alive,
		// as a fenced one is not.
		v.brokers = append(v.brokers, brokerView{info: bs.info, alive: !bs.info.Fenced && !bs.shutDown})
	}
	v.minIsr = make([]int, len(v.partitions))
	for i := range v.partitions {
		v.partitions[i] = v.partitions[i].Clone()
		v.minIsr[i] = c.minIsrLocked(v.partitions[i])
		k := keyOf(v.partitions[i])
		for _, r := range v.partitions[i].Replicas {
			if c.brokers[r].replicaOffline(k) {
				if v.offline == nil {
					v.offline = make(map[partitionKey][]int32)
				}
				v.offline[k] = append(v.offline[k], r)
			}
		}
	}
	return v, nil
}
