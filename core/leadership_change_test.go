package core

import (
	"slices"
	"testing"

	"github.com/replicad/replicad/core/tp"
)

// The leadership-change callback runs after each LeaderAndIsr with the
// partitions that newly became leader and the followers that changed, and not
// for a partition whose role did not change.
func TestLeadershipChangeCallback(t *testing.T) {
	var leaders, followers [][]tp.TopicPartition
	h := newHarness(t, 1, func(c *Config) {
		c.OnLeadershipChange = func(l, f []tp.TopicPartition) {
			leaders = append(leaders, slices.Clone(l))
			followers = append(followers, slices.Clone(f))
		}
	})
	t1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}), state("orders", 1, 2, 1, []int32{1, 2}, []int32{1, 2}))
	if len(leaders) != 1 || !slices.Equal(leaders[0], []tp.TopicPartition{tp0}) || !slices.Equal(followers[0], []tp.TopicPartition{t1}) {
		t.Fatalf("first call: leaders %v followers %v", leaders, followers)
	}
	// orders-0 stays leader at a new epoch: not a new leader.
	h.leaderAndIsr(1, state("orders", 0, 1, 2, []int32{1, 2}, []int32{1, 2}))
	if len(leaders) != 2 || len(leaders[1]) != 0 || len(followers[1]) != 0 {
		t.Fatalf("second call: leaders %v followers %v", leaders[1], followers[1])
	}
}
