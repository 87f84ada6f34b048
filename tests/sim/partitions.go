package sim

import (
	"context"
	"fmt"
	"slices"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Adding partitions (CreatePartitions, ctlclient alter-topic) in the
// simulation. The operator grows the topic by one or two partitions, asks
// for the count it has (INVALID_PARTITIONS), or only validates, under the
// same faults as every admin command: the store's write may fail, land
// with an error, land late, or land as the controller dies. Each partition
// the store holds gets its idempotent producers at the next step
// (growProducers), so the new partitions carry acknowledged records that
// the invariants hold the cluster to, through the faults and failovers
// that follow. The checker adds:
//   - no partition lost, and none half-added: within one topic ID the
//     store's partitions are numbered 0..n-1 and n never goes down
//     (checkPartitionCounts);
//   - the operator's answers: NONE leaves the store with the count asked
//     for (validate_only with it unchanged), INVALID_PARTITIONS only when
//     the store has at least that many;
//   - once healed, every live broker's Metadata agrees with the store on
//     the topic's partitions and topic ID (brokersAgree, in settled).

// growthRoom is how many partitions the topic may gain over Config.Partitions
// within the brokers' --max-partitions (maxPartitions): a larger count is
// refused WILL_EXCEED_PARTITION_LIMITS.
const growthRoom = 3

// createPartitionsOp is the operator's alter-topic, chosen at the
// scheduler's step from the count the store holds then.
func (s *Sim) createPartitionsOp() (string, func(context.Context)) {
	n := int32(0)
	if t, err := s.ctl.store.Topic(context.Background(), topic); err == nil {
		n = int32(len(t.Partitions))
	}
	count := n + []int32{0, 1, 1, 2}[s.rng.IntN(4)]
	validateOnly := s.rng.IntN(4) == 0
	what := fmt.Sprintf("alter-topic --partitions %d (has %d)", count, n)
	if validateOnly {
		what += " --validate-only"
	}
	return what, func(ctx context.Context) {
		resp, err := invoke[*replicadv1.CreatePartitionsResponse](ctx, s.op.conn, "CreatePartitions",
			&replicadv1.CreatePartitionsRequest{Topic: topic, Count: count, ValidateOnly: validateOnly})
		s.op.note("create-partitions", resp.GetErrorCode(), err)
		if err != nil {
			return
		}
		// The operator runs one command at a time: nobody deletes the
		// topic between the answer and this read.
		stored := -1
		if t, err := s.ctl.store.Topic(context.Background(), topic); err == nil {
			stored = len(t.Partitions)
		}
		var broken string
		switch code := resp.GetErrorCode(); {
		case code == replicadv1.ErrorCode_ERROR_CODE_NONE && validateOnly && stored >= int(count):
			broken = fmt.Sprintf("alter-topic --partitions %d --validate-only answered NONE, and the store has %d partitions", count, stored)
		case code == replicadv1.ErrorCode_ERROR_CODE_NONE && !validateOnly && stored < int(count):
			broken = fmt.Sprintf("alter-topic --partitions %d answered NONE, and the store has %d partitions", count, stored)
		case code == replicadv1.ErrorCode_ERROR_CODE_NONE && len(resp.GetPartitions()) == 0:
			broken = fmt.Sprintf("alter-topic --partitions %d answered NONE with no partitions", count)
		case code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS && stored < int(count):
			broken = fmt.Sprintf("alter-topic --partitions %d answered INVALID_PARTITIONS (%s), and the store has %d partitions",
				count, resp.GetErrorMessage(), stored)
		}
		if broken != "" {
			s.op.mu.Lock()
			s.op.broken = append(s.op.broken, broken)
			s.op.mu.Unlock()
		}
	}
}

// growProducers starts the idempotent producers of every partition of the
// topic the store holds that has none yet (added by the operator; a topic
// deleted and created again with fewer partitions leaves the extra ones'
// producers retrying until it grows again). At a step, so a schedule
// starts them at the same point every run.
func (s *Sim) growProducers() {
	if s.cfg.Plain || s.producers == nil {
		return
	}
	t, err := s.ctl.store.Topic(context.Background(), topic)
	if err != nil {
		return
	}
	started := false
	for p := s.producedPartitions(); p < len(t.Partitions); p++ {
		s.record(fmt.Sprintf("producers for %s-%d", topic, p))
		s.startPartitionProducers(int32(p))
		started = true
	}
	if started {
		s.cfg.Wait()
	}
}

// producedPartitions is how many partitions have producers.
func (s *Sim) producedPartitions() int {
	n := 0
	for _, p := range s.producers {
		n = max(n, int(p.t.Partition)+1)
	}
	return n
}

// startPartitionProducers makes partition p's idempotent producers and
// starts their first instances.
func (s *Sim) startPartitionProducers(p int32) {
	t := tp.TopicPartition{Topic: topic, Partition: p}
	for range s.cfg.Producers {
		ip := &idemProducer{s: s, t: t, index: len(s.producers)}
		s.producers = append(s.producers, ip)
		ip.startInstance()
	}
}

// checkPartitionCounts: within one topic ID the store's partitions are
// numbered 0..n-1 (a CreatePartitions lands whole or not at all) and n
// never goes down (no partition of a topic is lost, through any failover;
// a deleted topic's ID is gone for good).
func (c *checker) checkPartitionCounts(parts []store.Partition) {
	if c.partitionCounts == nil {
		c.partitionCounts = map[string]int{}
	}
	byID := map[string][]int32{}
	var ids []string
	for _, p := range parts {
		if _, ok := byID[p.TopicID]; !ok {
			ids = append(ids, p.TopicID)
		}
		byID[p.TopicID] = append(byID[p.TopicID], p.Partition)
	}
	slices.Sort(ids)
	for _, id := range ids {
		nums := byID[id]
		slices.Sort(nums)
		for i, n := range nums {
			if n != int32(i) {
				c.fail("store: topic ID %s has partitions %v, not 0..%d: a partition added half, or lost", id, nums, len(nums)-1)
				break
			}
		}
		if prev := c.partitionCounts[id]; len(nums) < prev {
			c.fail("store: topic ID %s has %d partitions, had %d: partitions lost", id, len(nums), prev)
		}
		c.partitionCounts[id] = max(c.partitionCounts[id], len(nums))
	}
}

// brokersAgree says which live broker's Metadata disagrees with the store
// on the topic's partitions ("" when none does): once healed, every broker
// must show every partition the store holds, under its topic ID, and no
// other (a client would send records to a partition that does not exist,
// or miss one).
func (s *Sim) brokersAgree() string {
	t, err := s.ctl.store.Topic(context.Background(), topic)
	if err != nil {
		return ""
	}
	for _, b := range s.brokers {
		if b.cur == nil || !b.up() {
			continue
		}
		v := b.cur.rm.Metadata([]string{topic})
		var got []string
		for _, tm := range v.Topics {
			for _, p := range tm.Partitions {
				got = append(got, fmt.Sprintf("%d", p.Partition))
			}
			if tm.TopicID != t.Partitions[0].TopicID || len(tm.Partitions) != len(t.Partitions) {
				return fmt.Sprintf("%s's Metadata shows %s with topic ID %s, partitions %v; the store holds %d partitions under %s",
					b.name, topic, tm.TopicID, got, len(t.Partitions), t.Partitions[0].TopicID)
			}
		}
	}
	return ""
}
