package core

import (
	"testing"

	"github.com/replicad/replicad/core/tp"
)

// A LeaderAndIsr that would take the broker past its MaxPartitions (a stale
// controller's, a hand-made one) refuses the new partitions beyond the
// budget with WILL_EXCEED_PARTITION_LIMITS, hosts the ones within it, and
// keeps serving the partitions it had; a later state of a hosted partition
// is still taken.
func TestLeaderAndIsrOverPartitionBudget(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) { c.MaxPartitions = 3 })
	if r := h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1})); codeOf(r, tp0) != ErrNone {
		t.Fatalf("first partition: %v", r)
	}
	if res := h.produce(tp0, 1, "before"); res.Error != ErrNone {
		t.Fatalf("produce before: %v", res.Error)
	}
	var states []PartitionState
	for p := int32(0); p < 5; p++ {
		states = append(states, state("big", p, 1, 1, []int32{1}, []int32{1}))
	}
	r := h.leaderAndIsr(1, states...)
	for p := int32(0); p < 5; p++ {
		want := ErrNone
		if p >= 2 {
			want = ErrWillExceedPartitionLimits
		}
		t1 := tp.TopicPartition{Topic: "big", Partition: p}
		if got := codeOf(r, t1); got != want {
			t.Errorf("big-%d: %v, want %v", p, got, want)
		}
		if _, hosted := h.describe(t1); hosted != (want == ErrNone) {
			t.Errorf("big-%d hosted %v, want %v", p, hosted, want == ErrNone)
		}
	}
	// What was hosted keeps working: produce, and a new leader epoch.
	if res := h.produce(tp0, 1, "after"); res.Error != ErrNone || res.BaseOffset != 1 {
		t.Errorf("produce to a hosted partition after the refusal: %+v", res)
	}
	if r := h.leaderAndIsr(1, state("orders", 0, 1, 2, []int32{1}, []int32{1})); codeOf(r, tp0) != ErrNone {
		t.Errorf("a hosted partition's next leader epoch at the budget: %v", codeOf(r, tp0))
	}
	if p, _ := h.describe(tp0); p.LeaderEpoch != 2 {
		t.Errorf("orders-0 leader epoch %d, want 2", p.LeaderEpoch)
	}
}

// A broker restarted with a --max-partitions below what it already holds
// (lowered by hand, or a default derived from a smaller descriptor limit)
// still takes back every log it has on disk: they are not new partitions.
// Refusing them left a partition it leads never served (the controller does
// not act on WILL_EXCEED_PARTITION_LIMITS from a broker).
func TestRestartBelowBudgetKeepsLogsOnDisk(t *testing.T) {
	h := newHarness(t, 1)
	var states []PartitionState
	for p := int32(0); p < 4; p++ {
		states = append(states, state("orders", p, 1, 1, []int32{1}, []int32{1}))
	}
	if r := h.leaderAndIsr(1, states...); r.Error != ErrNone {
		t.Fatalf("create: %+v", r)
	}
	h.cfg.MaxPartitions = 2
	h.restart()
	for i := range states {
		states[i].IsNew, states[i].LeaderEpoch = false, 2
	}
	r := h.leaderAndIsr(2, append(states, state("new", 0, 1, 1, []int32{1}, []int32{1}))...)
	for p := int32(0); p < 4; p++ {
		t1 := tp.TopicPartition{Topic: "orders", Partition: p}
		if got := codeOf(r, t1); got != ErrNone {
			t.Errorf("orders-%d on disk after the restart: %v, want NONE", p, got)
		}
	}
	if got := codeOf(r, tp.TopicPartition{Topic: "new"}); got != ErrWillExceedPartitionLimits {
		t.Errorf("a new partition past the budget: %v, want WILL_EXCEED_PARTITION_LIMITS", got)
	}
}
