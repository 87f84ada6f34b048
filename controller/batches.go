package controller

import (
	"context"
	"slices"
	"strings"

	"github.com/replicad/replicad/controller/store"
)

// DefaultDecisionBatch is the most partitions one store write of a big
// decision changes (Config.DecisionBatch). A batch of 1,000 RF 3 partitions
// is a bbolt transaction of about 150 KB and a few milliseconds of the
// controller's time (BenchmarkScale100k), small against the 100 ms a hold
// of the lock may last. On etcd a batch also touches fewer topics, each one
// key, against its 128-operation transaction limit (see etcd.go).
const DefaultDecisionBatch = 1000

// sendBatch is Config.SendBatch, defaulted also where a Controller was made
// without New (the model check).
func (c *Controller) sendBatch() int {
	if c.cfg.SendBatch > 0 {
		return c.cfg.SendBatch
	}
	return 2 * max(c.cfg.DecisionBatch, DefaultDecisionBatch)
}

// keysOfReplicasLocked are the partitions any of ids is a replica of,
// sorted, the order every decision goes in.
func (c *Controller) keysOfReplicasLocked(ids []int32) []partitionKey {
	var keys []partitionKey
	for _, k := range c.sortedKeysLocked() {
		if slices.ContainsFunc(c.parts[k].Replicas, func(r int32) bool { return slices.Contains(ids, r) }) {
			keys = append(keys, k)
		}
	}
	return keys
}

// leadershipsFirstLocked orders keys (sorted) so that the partitions one of
// ids leads come first, each group still sorted: when a move goes in
// several writes, the partitions that cannot be produced to until it is
// told go in the first ones, and the ISR shrinks, which nobody waits for,
// after.
func (c *Controller) leadershipsFirstLocked(keys []partitionKey, ids []int32) []partitionKey {
	led := make([]partitionKey, 0, len(keys))
	var rest []partitionKey
	for _, k := range keys {
		if slices.Contains(ids, c.parts[k].Leader) {
			led = append(led, k)
		} else {
			rest = append(rest, k)
		}
	}
	return append(led, rest...)
}

func comparePartitionKeys(a, b partitionKey) int {
	if c := strings.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return int(a.partition - b.partition)
}

// yieldLocked releases c.mu and takes it again, so that what waited for it
// (an AlterPartition, a registration, a heartbeat that changes state) runs
// between two writes of a long decision. It reports whether this
// controller still acts in the same term: if not, the decision stops.
func (c *Controller) yieldLocked() bool {
	epoch := c.epoch
	c.unlock()
	c.lock()
	return c.active && c.epoch == epoch
}

// writeBatchesLocked decides over keys in batches of Config.DecisionBatch:
// for each partition still there, decide returns its next state and whether
// it changes, and each batch's changes are one store write (commitLocked),
// announced to the brokers as it lands. With yield, c.mu is released
// between two batches; then, unless still reports that the decision still
// applies (it may narrow what decide does), the rest is dropped. Every
// batch re-reads the partitions it decides on, so a change made between
// two batches is decided on, never overwritten (and the store's
// compare-and-set would refuse it). It returns the brokers sent something.
func (c *Controller) writeBatchesLocked(ctx context.Context, keys []partitionKey, yield bool, still func() bool,
	decide func(store.Partition) (store.Partition, bool)) ([]int32, error) {
	var touched []int32
	batch := c.cfg.DecisionBatch
	if batch <= 0 {
		batch = DefaultDecisionBatch
	}
	for start := 0; start < len(keys); start += batch {
		if start > 0 && yield {
			if !c.yieldLocked() {
				return touched, errNotController
			}
			if still != nil && !still() {
				return touched, nil
			}
		}
		var updates []store.PartitionUpdate
		for _, k := range keys[start:min(start+batch, len(keys))] {
			p, ok := c.parts[k]
			if !ok {
				continue // deleted meanwhile
			}
			if next, changed := decide(p); changed {
				updates = append(updates, update(p, next))
			}
		}
		t, err := c.commitLocked(ctx, updates, nil)
		if err != nil {
			return touched, err
		}
		for _, id := range t {
			if !slices.Contains(touched, id) {
				touched = append(touched, id)
			}
		}
	}
	return touched, nil
}
