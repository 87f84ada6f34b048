package controller

import (
	"cmp"
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Preferred replica elections (Kafka's PREFERRED election type of
// ElectLeaders) and the automatic leader rebalance built on them (Kafka's
// auto.leader.rebalance.enable). The preferred leader of a partition is the
// first replica of its assignment; assignReplicas spreads those evenly, so
// leading from them spreads the load evenly. Failovers move leadership
// elsewhere and nothing moves it back by itself: after a rolling restart the
// broker restarted first leads nearly everything. These put it back.

// Defaults of the automatic leader rebalance, Kafka's.
const (
	// DefaultLeaderImbalanceCheckInterval is Kafka's
	// leader.imbalance.check.interval.seconds (300).
	DefaultLeaderImbalanceCheckInterval = 5 * time.Minute
	// DefaultLeaderImbalancePerBrokerPercentage is Kafka's
	// leader.imbalance.per.broker.percentage.
	DefaultLeaderImbalancePerBrokerPercentage = 10
	// DefaultLeaderRebalanceBatch caps the leaderships one check moves, so
	// that one check is one bounded store transaction (within etcd's default
	// 128 operations per transaction even when every partition is of another
	// topic) and one bounded burst of LeaderAndIsr (and of clients refreshing
	// their leaders).
	DefaultLeaderRebalanceBatch = 100
	// RebalanceFollowUp is how soon the next check comes when the cap left
	// leaderships to move: the rest goes in further batches, not one more
	// every interval.
	RebalanceFollowUp = 5 * time.Second
)

// preferredElection is p led by its preferred replica (the first of its
// assignment), with the leader and partition epochs raised, or why not:
// ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE
// when it is not in the ISR or not eligible (fenced, shutting down, its
// replica offline). As Kafka's PreferredReplicaPartitionLeaderElectionStrategy
// it takes the preferred replica or nobody: the ELR is not enough, since an
// ELR member elected would make up the ISR alone, a shrink nobody asked for.
func preferredElection(p store.Partition, eligible func(int32) bool) (store.Partition, replicadv1.ErrorCode, string) {
	if len(p.Replicas) == 0 {
		return p, replicadv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE, "the partition has no replicas"
	}
	preferred := p.Replicas[0]
	switch {
	case p.Leader == preferred:
		return p, replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED, "the preferred replica already leads"
	case !slices.Contains(p.ISR, preferred):
		return p, replicadv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is not in the ISR"
	case !eligible(preferred):
		return p, replicadv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is fenced, shutting down or offline"
	}
	next := withLeader(p, preferred)
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, replicadv1.ErrorCode_ERROR_CODE_NONE, ""
}

// electRequest names the partitions of one topic an ElectLeaders asks for;
// no partitions: all of them.
type electRequest struct {
	topic      string
	partitions []int32
}

// electResult is one partition's outcome of an ElectLeaders. partition is
// -1 for a whole topic that does not exist; state is the partition after
// the election (zero when it does not exist).
type electResult struct {
	topic     string
	partition int32
	code      replicadv1.ErrorCode
	msg       string
	state     store.Partition
}

// electPreferred elects the preferred replica of every partition asked for
// (all of them when reqs is empty), in one store transaction, and answers
// each partition's outcome in topic and partition order.
func (c *Controller) electPreferred(ctx context.Context, reqs []electRequest) ([]electResult, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.electLeaders", trace.WithAttributes(
		attribute.String("replicad.election_type", "preferred"), attribute.Int("replicad.topics", len(reqs))))
	defer span.End()
	c.lock()
	if !c.active {
		c.unlock()
		return nil, errNotController
	}
	var results []electResult
	for _, k := range c.electKeysLocked(reqs, &results) {
		p, ok := c.parts[k]
		if !ok {
			results = append(results, electResult{topic: k.topic, partition: k.partition,
				code: replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, msg: "partition does not exist"})
			continue
		}
		next, code, msg := preferredElection(p, c.eligibleForLocked(k))
		results = append(results, electResult{topic: k.topic, partition: k.partition, code: code, msg: msg, state: next})
	}
	slices.SortFunc(results, func(a, b electResult) int {
		if a.topic != b.topic {
			return cmp.Compare(a.topic, b.topic)
		}
		return int(a.partition - b.partition)
	})
	var updates []store.PartitionUpdate
	for _, r := range results {
		if r.code == replicadv1.ErrorCode_ERROR_CODE_NONE {
			updates = append(updates, update(c.parts[partitionKey{r.topic, r.partition}], r.state))
		}
	}
	old := make(map[partitionKey]int32, len(updates))
	for _, u := range updates {
		old[keyOf(u.New)] = c.parts[keyOf(u.New)].Leader
	}
	touched, err := c.commitLocked(ctx, updates, nil)
	c.unlock()
	span.SetAttributes(attribute.Int("replicad.partitions", len(results)), attribute.Int("replicad.partitions_elected", len(updates)))
	if err != nil {
		span.RecordError(err)
		return nil, err
	}
	for _, u := range updates {
		c.log.Info().Str("topic", u.New.Topic).Int32("partition", u.New.Partition).Int32("old_leader", old[keyOf(u.New)]).
			Int32("leader", u.New.Leader).Int32("leader_epoch", u.New.LeaderEpoch).Str("election", "preferred").Msg("leader elected")
	}
	c.waitDelivered(ctx, touched)
	return results, nil
}

// electKeysLocked is the partitions reqs names, each once: every partition
// when reqs is empty, every partition of a topic that names none. A topic
// named without partitions that does not exist gets its result (partition
// -1) in results now.
func (c *Controller) electKeysLocked(reqs []electRequest, results *[]electResult) []partitionKey {
	if len(reqs) == 0 {
		keys := make([]partitionKey, 0, len(c.parts))
		for p := range c.allPartitionsLocked() {
			keys = append(keys, keyOf(p))
		}
		return keys
	}
	seen := make(map[partitionKey]bool)
	var keys []partitionKey
	add := func(k partitionKey) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for _, r := range reqs {
		if len(r.partitions) > 0 {
			for _, n := range r.partitions {
				add(partitionKey{r.topic, n})
			}
			continue
		}
		found := false
		for p := range c.allPartitionsLocked() {
			if p.Topic == r.topic {
				add(keyOf(p))
				found = true
			}
		}
		if !found && !seen[partitionKey{r.topic, -1}] {
			seen[partitionKey{r.topic, -1}] = true
			*results = append(*results, electResult{topic: r.topic, partition: -1,
				code: replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, msg: "topic " + r.topic + " does not exist"})
		}
	}
	return keys
}

// brokerImbalance is one broker's leader imbalance: the partitions it is the
// preferred leader of, and how many of those another broker (or nobody)
// leads.
type brokerImbalance struct {
	preferred, notLed int
}

// exceeds reports whether the imbalance is above pct percent: Kafka's
// imbalanceRatio > leader.imbalance.per.broker.percentage / 100.
func (b brokerImbalance) exceeds(pct int) bool {
	return b.preferred > 0 && b.notLed*100 > pct*b.preferred
}

// leaderImbalance is every preferred leader's imbalance over parts.
func leaderImbalance(parts []store.Partition) map[int32]brokerImbalance {
	out := make(map[int32]brokerImbalance)
	for _, p := range parts {
		if len(p.Replicas) == 0 {
			continue
		}
		b := out[p.Replicas[0]]
		b.preferred++
		if p.Leader != p.Replicas[0] {
			b.notLed++
		}
		out[p.Replicas[0]] = b
	}
	return out
}

// rebalancePlan is what one rebalance check does over parts (in order): for
// each broker whose imbalance exceeds pct, its partitions led elsewhere go
// back to it where preferredElection allows (it is in the ISR and eligible
// per eligibleFor) and no reassignment is in progress (Kafka leaves those
// to the reassignment), at most batch of them (batch > 0). It returns the
// new states and how many more would have moved without the cap.
func rebalancePlan(parts []store.Partition, eligibleFor func(partitionKey) func(int32) bool, pct, batch int) (moves []store.Partition, deferred int) {
	imb := leaderImbalance(parts)
	for _, p := range parts {
		if len(p.Replicas) == 0 || !imb[p.Replicas[0]].exceeds(pct) || len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
			continue
		}
		next, code, _ := preferredElection(p, eligibleFor(keyOf(p)))
		if code != replicadv1.ErrorCode_ERROR_CODE_NONE {
			continue
		}
		if len(moves) == batch {
			deferred++
			continue
		}
		moves = append(moves, next)
	}
	return moves, deferred
}

// rebalanceLeaders is one automatic leader rebalance check. It commits the
// moves without waiting for the brokers to hear of them (the session checks
// share its goroutine), and returns how many moves the batch cap deferred.
func (c *Controller) rebalanceLeaders(ctx context.Context) int {
	c.lock()
	defer c.unlock()
	if !c.active {
		return 0
	}
	parts := c.sortedPartitionsLocked()
	pct := c.cfg.LeaderImbalancePerBrokerPercentage
	moves, deferred := rebalancePlan(parts, c.eligibleForLocked, pct, c.cfg.LeaderRebalanceBatch)
	if len(moves) == 0 {
		return 0
	}
	var imbalanced []int
	for id, b := range leaderImbalance(parts) {
		if b.exceeds(pct) {
			imbalanced = append(imbalanced, int(id))
		}
	}
	slices.Sort(imbalanced)
	ctx, span := c.tracer.Start(ctx, "Controller.rebalanceLeaders", trace.WithAttributes(
		attribute.IntSlice("replicad.imbalanced_brokers", imbalanced),
		attribute.Int("replicad.leader_imbalance_percentage", pct),
		attribute.Int("replicad.partitions", len(moves)), attribute.Int("replicad.partitions_deferred", deferred)))
	defer span.End()
	updates := make([]store.PartitionUpdate, len(moves))
	for i, next := range moves {
		updates[i] = update(c.parts[keyOf(next)], next)
	}
	if _, err := c.commitLocked(ctx, updates, nil); err != nil {
		span.RecordError(err)
		c.log.Error().Err(err).Int("partitions", len(moves)).Msg("leader rebalance: could not move leadership to the preferred replicas; the next check retries")
		return 0
	}
	c.log.Info().Ints("imbalanced_brokers", imbalanced).Int("partitions", len(moves)).Int("deferred", deferred).
		Str("first_topic", moves[0].Topic).Int32("first_partition", moves[0].Partition).
		Msg("leader rebalance: moved leadership back to the preferred replicas")
	return deferred
}

// rebalanceTimer is the timer of the automatic leader rebalance checks, nil
// when they are off.
func (c *Controller) rebalanceTimer() *time.Timer {
	if !c.cfg.AutoLeaderRebalance {
		return nil
	}
	return time.NewTimer(c.cfg.LeaderImbalanceCheckInterval)
}

// runRebalanceCheck runs one check and arms t for the next: after the
// interval, or sooner when the batch cap left moves for later.
func (c *Controller) runRebalanceCheck(ctx context.Context, t *time.Timer) {
	next := c.cfg.LeaderImbalanceCheckInterval
	if c.rebalanceLeaders(ctx) > 0 {
		next = min(next, RebalanceFollowUp)
	}
	t.Reset(next)
}
