package core

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"
)

// heldIsrChanger holds every submitted change until the test answers it, as a
// controller-backed changer would while AlterPartition is in flight.
type heldIsrChanger struct {
	mu      sync.Mutex
	changes []IsrChange
	dones   []func(IsrChangeResult)
}

func (c *heldIsrChanger) Submit(change IsrChange, done func(IsrChangeResult)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes = append(c.changes, change)
	c.dones = append(c.dones, done)
}

func (c *heldIsrChanger) submitted() []IsrChange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.changes)
}

// answer completes the i-th change.
func (c *heldIsrChanger) answer(i int, res IsrChangeResult) {
	c.mu.Lock()
	done := c.dones[i]
	c.mu.Unlock()
	done(res)
}

// With an asynchronous changer, an expansion counts for the HW while in
// flight (its follower must have what the HW passes) and is dropped when the
// controller says it did not apply it; one change is in flight at a time.
func TestIsrExpansionCountsAtOnceAndIsRevertedIfRejected(t *testing.T) {
	changer := &heldIsrChanger{}
	h := newHarness(t, 1, func(c *Config) { c.IsrChanger = changer })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1}))
	h.produce(tp0, AcksLeader, "a", "b")
	h.fetch(2, fetchAt(2, 1))
	if got := changer.submitted(); len(got) != 1 || !slices.Equal(got[0].NewIsr, []int32{1, 2}) || got[0].PartitionEpoch != 0 || got[0].LeaderEpoch != 1 {
		t.Fatalf("submitted %+v, want one expansion to [1 2] from partition epoch 0", got)
	}
	h.produce(tp0, AcksLeader, "c")
	p, _ := h.describe(tp0)
	if !slices.Equal(p.ISR, []int32{1}) || p.HighWatermark != 2 {
		t.Fatalf("expansion in flight: ISR %v HW %d, want committed [1] and HW 2 (the follower at 2 counts at once)", p.ISR, p.HighWatermark)
	}
	h.fetch(3, fetchAt(3, 1))
	if n := len(changer.submitted()); n != 1 {
		t.Fatalf("%d changes submitted while one was in flight", n)
	}
	changer.answer(0, IsrChangeResult{Error: ErrIneligibleReplica})
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1}) || p.HighWatermark != 3 || p.PartitionEpoch != 0 {
		t.Fatalf("after rejection: ISR %v HW %d partition epoch %d, want [1], 3 (the follower no longer counts), 0", p.ISR, p.HighWatermark, p.PartitionEpoch)
	}
}

// Under min ISR, an expansion in flight does not move the HW: the committed
// ISR is what is held to the minimum (KIP-966), since the controller keeps
// the replicas that left it as eligible leaders while the HW cannot move.
func TestInflightExpansionUnderMinIsrDoesNotMoveHW(t *testing.T) {
	changer := &heldIsrChanger{}
	h := newHarness(t, 1, func(c *Config) { c.MinInsyncReplicas = 2; c.IsrChanger = changer })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1}))
	h.produce(tp0, AcksLeader, "a", "b")
	h.fetch(2, fetchAt(2, 1))
	if p, _ := h.describe(tp0); p.HighWatermark != 0 || len(changer.submitted()) != 1 {
		t.Fatalf("HW %d with an expansion to [1 2] in flight under min ISR 2, want 0", p.HighWatermark)
	}
	changer.answer(0, IsrChangeResult{Isr: []int32{1, 2}, PartitionEpoch: 1})
	if p, _ := h.describe(tp0); p.HighWatermark != 2 {
		t.Fatalf("HW %d once [1 2] is committed, want 2", p.HighWatermark)
	}
}

// With an asynchronous changer, a shrink changes neither the ISR nor the HW
// until the controller accepts it.
func TestIsrShrinkAppliesOnlyOnceAccepted(t *testing.T) {
	changer := &heldIsrChanger{}
	h := newHarness(t, 1, func(c *Config) { c.ReplicaLagTimeMax = 10 * time.Second; c.IsrChanger = changer })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	h.fetch(2, fetchAt(0, 1))
	h.produce(tp0, AcksLeader, "a")
	h.clock.Advance(15 * time.Second)
	got := changer.submitted()
	if len(got) != 1 || !slices.Equal(got[0].NewIsr, []int32{1}) {
		t.Fatalf("submitted %+v, want one shrink to [1]", got)
	}
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1, 2}) || p.HighWatermark != 0 {
		t.Fatalf("shrink in flight: ISR %v HW %d, want [1 2] and 0", p.ISR, p.HighWatermark)
	}
	changer.answer(0, IsrChangeResult{Isr: []int32{1}, PartitionEpoch: 7})
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1}) || p.PartitionEpoch != 7 || p.HighWatermark != 1 {
		t.Fatalf("accepted shrink: ISR %v partition epoch %d HW %d, want [1], 7, 1", p.ISR, p.PartitionEpoch, p.HighWatermark)
	}
}

// A proposed ISR carries the broker epoch each follower sent in its fetches,
// and none for a follower that never sent one.
func TestIsrChangeCarriesFollowerBrokerEpochs(t *testing.T) {
	changer := &heldIsrChanger{}
	h := newHarness(t, 1, func(c *Config) { c.IsrChanger = changer })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 3}))
	h.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: 2, BrokerEpoch: 5, Partitions: []FetchPartition{fetchAt(0, 1)}})
	got := changer.submitted()
	if len(got) != 1 || !slices.Equal(got[0].NewIsr, []int32{1, 2, 3}) || !maps.Equal(got[0].BrokerEpochs, map[int32]int64{2: 5}) {
		t.Fatalf("submitted %+v, want an expansion to [1 2 3] with broker epochs {2: 5}", got)
	}
}

// A change in flight is withdrawn once a LeaderAndIsr replaces the state it
// was based on, or once the partition is stopped (its topic deleted): a
// changer retrying it while the controller is away must not send it, since a
// topic re-created under the name starts at the same epochs and the
// controller would commit it there (tests/sim, seed 647001108).
func TestIsrChangeWithdrawnWhenReplacedOrStopped(t *testing.T) {
	shrinkInFlight := func(t *testing.T) (*harness, IsrChange) {
		changer := &heldIsrChanger{}
		h := newHarness(t, 1, func(c *Config) { c.ReplicaLagTimeMax = 10 * time.Second; c.IsrChanger = changer })
		h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
		h.fetch(2, fetchAt(0, 1))
		h.produce(tp0, AcksLeader, "a")
		h.clock.Advance(15 * time.Second)
		got := changer.submitted()
		if len(got) != 1 || got[0].Withdrawn == nil || got[0].Withdrawn() {
			t.Fatalf("submitted %+v, want one shrink, not withdrawn", got)
		}
		return h, got[0]
	}
	t.Run("LeaderAndIsr", func(t *testing.T) {
		h, change := shrinkInFlight(t)
		h.leaderAndIsr(1, state("orders", 0, 1, 2, []int32{1, 2}, []int32{1, 2}))
		if !change.Withdrawn() {
			t.Fatal("change still wanted after a LeaderAndIsr replaced its state")
		}
	})
	t.Run("StopReplica", func(t *testing.T) {
		h, change := shrinkInFlight(t)
		resp := h.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1,
			Partitions: []StopReplicaPartition{{TopicPartition: tp0, LeaderEpoch: -1, Delete: true}}})
		if resp.Error != ErrNone || resp.PartitionErrors[0].Error != ErrNone {
			t.Fatalf("delete: %+v", resp)
		}
		if !change.Withdrawn() {
			t.Fatal("change still wanted after its partition was deleted")
		}
	})
}
