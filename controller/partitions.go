package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Adding partitions to a topic (Kafka's CreatePartitions, kafka-topics
// --alter --partitions). The new partitions are assigned as CreateTopic
// would have assigned them had the topic been created with the new count
// (assignReplicasFrom), stored in one write (all or none: store
// CreatePartitions), and told to their replicas and every broker as a new
// topic's are (announceCreatedLocked).
//
// A retry of a request that landed unanswered finds the topic at the count
// it asked for and is answered INVALID_PARTITIONS "already has N
// partitions", as Kafka answers: the controller cannot tell a retry from a
// second request. The message says that an earlier request asking for N
// was applied, so a client whose first attempt timed out knows where it
// stands.

// createPartitions grows topic to count partitions (validateOnly: only
// answers the partitions it would add) and returns the partitions added.
func (c *Controller) createPartitions(ctx context.Context, topic string, count int, validateOnly bool) ([]store.Partition, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.createPartitions", trace.WithAttributes(
		attribute.String("replicad.topic", topic), attribute.Int("replicad.partitions", count),
		attribute.Bool("replicad.validate_only", validateOnly)))
	defer span.End()
	c.lock()
	if !c.active {
		c.unlock()
		return nil, errNotController
	}
	existing := c.partitionCountLocked(topic)
	if existing == 0 {
		c.unlock()
		return nil, refuse(replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "topic %q does not exist", topic)
	}
	switch {
	case count == existing:
		c.unlock()
		return nil, refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS,
			"topic %q already has %d partitions (if an earlier request for %d timed out, it was applied)", topic, existing, count)
	case count < existing:
		c.unlock()
		return nil, refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS,
			"topic %q has %d partitions, more than the %d asked for: partitions can be added, never removed", topic, existing, count)
	}
	first := c.parts[partitionKey{topic, 0}]
	rf := len(targetOf(first))
	if rf < 1 {
		// Never made by CreateTopic or a reassignment: no factor to follow.
		c.unlock()
		return nil, refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR,
			"partition 0 of topic %q has no replicas to take the replication factor from", topic)
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
			"topic %q has replication factor %d, larger than the %d live brokers %v", topic, rf, len(live), live)
	}
	assignment := assignReplicasFrom(live, existing, count-existing, rf, c.assignmentStartLocked(topic, existing, live, rf))
	op := fmt.Sprintf("adding %d partitions to topic %q (replication factor %d)", count-existing, topic, rf)
	if err := c.refuseOverBudgetLocked(ctx, op, assignment); err != nil {
		c.unlock()
		return nil, err
	}
	parts := make([]store.Partition, len(assignment))
	for i, rs := range assignment {
		parts[i] = store.Partition{Topic: topic, TopicID: first.TopicID, Partition: int32(existing + i), Leader: rs[0],
			ISR: slices.Clone(rs), Replicas: rs}
	}
	span.SetAttributes(attribute.String("replicad.topic_id", first.TopicID), attribute.Int("replicad.existing_partitions", existing),
		attribute.Int("replicad.replication_factor", rf))
	if validateOnly {
		c.unlock()
		return parts, nil
	}
	sctx, cancel := c.storeCtx(ctx)
	err := c.cfg.Store.CreatePartitions(sctx, topic, int32(existing), parts)
	cancel()
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			// Gone from the store, not from memory: a delete landed
			// unanswered.
			c.resyncLocked(ctx, "topic deleted in the store only", err)
			c.unlock()
			return nil, refuse(replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "topic %q does not exist", topic)
		}
		// A conflict (the store has another count: an earlier request
		// landed unanswered) or an unknown outcome: re-read the store, so
		// that partitions that landed are held and announced, and the
		// retry is decided on what is stored.
		err = c.writeFailedLocked(ctx, "partition creation not stored", err)
		c.unlock()
		return nil, err
	}
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
	c.log.Info().Str("topic", topic).Str("topic_id", first.TopicID).Int("from", existing).Int("to", count).
		Int("replication_factor", rf).Msg("partitions created")
	c.waitDelivered(ctx, touched)
	return parts, nil
}

// partitionCountLocked is the number of partitions of topic held (0: no
// such topic). A topic's partitions are numbered 0..n-1.
func (c *Controller) partitionCountLocked(topic string) int {
	n := 0
	for {
		if _, ok := c.parts[partitionKey{topic, int32(n)}]; !ok {
			return n
		}
		n++
	}
}

// assignmentStartLocked is the start (assignReplicas) that the topic's
// first partitions were assigned with over live, so that the partitions
// added continue the pattern. Partition 0's first replica fixes the start
// modulo n (the brokers); the n-1 starts that agree with it cover every
// shift (modulo n-1), and the one that reproduces most of the first 2n
// partitions wins. A topic reassigned since, or created over other
// brokers, may match none: then, as Kafka's createPartitions does, the
// start is the position of partition 0's first replica among the live
// brokers (or of the next one up).
func (c *Controller) assignmentStartLocked(topic string, existing int, live []int32, rf int) int {
	n := len(live)
	sample := min(existing, 2*n)
	have := make([][]int32, sample)
	for p := range sample {
		have[p] = targetOf(c.parts[partitionKey{topic, int32(p)}])
	}
	lead := have[0][0]
	i := slices.IndexFunc(live, func(id int32) bool { return id >= lead })
	if i < 0 {
		return 0
	}
	if live[i] != lead || rf == 1 || n == 1 {
		return i // the shift does not matter with one replica
	}
	best, bestScore := i, 0
	for k := range n - 1 {
		s := i + k*n
		score := 0
		for p, rs := range assignReplicasFrom(live, 0, sample, rf, s) {
			if slices.Equal(rs, have[p]) {
				score++
			}
		}
		if score > bestScore {
			best, bestScore = s, score
		}
	}
	return best
}

// CreatePartitions implements ControllerService.
func (c *Controller) CreatePartitions(ctx context.Context, req *replicadv1.CreatePartitionsRequest) (*replicadv1.CreatePartitionsResponse, error) {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return nil, err
	}
	if n := req.GetCount(); n <= 0 || n > maxPartitionsPerTopic {
		return nil, invalid("count", "must be in 1..%d (got %d)", maxPartitionsPerTopic, n)
	}
	// As CreateTopic: each replica's dir "topic-partition" must fit
	// Linux's 255 bytes.
	if most := tp.MaxPartitionsFor(req.GetTopic()); int64(req.GetCount()) > most {
		return nil, invalid("count", "a %d-character topic can have at most %d partitions (its dir names \"topic-partition\" must fit in %d bytes) (got %d)",
			len(req.GetTopic()), most, tp.MaxDirNameLength, req.GetCount())
	}
	parts, err := c.createPartitions(ctx, req.GetTopic(), int(req.GetCount()), req.GetValidateOnly())
	code, msg, err := c.outcome(err)
	if err != nil {
		return nil, err
	}
	resp := &replicadv1.CreatePartitionsResponse{ErrorCode: code, ErrorMessage: msg}
	for _, p := range parts {
		resp.Partitions = append(resp.Partitions, clusterPartition(p))
	}
	return resp, nil
}
