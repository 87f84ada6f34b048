package core

import (
	"slices"
	"testing"

	"github.com/replicad/replicad/internal/spantest"
)

// A possibly committed ISR expansion is kept on an unclear answer: the
// controller may have committed {1,2,3} and lost the answer, and a leader
// that fell back to {1,2} would ack an acks=all record broker 3 lacks, while
// broker 3 is in the controller's ISR and can be elected (issue 10, path 1).
// As Kafka's handleAlterPartitionError, only OPERATION_NOT_ATTEMPTED and
// INELIGIBLE_REPLICA reset to the committed ISR; the other errors leave the
// change pending until new metadata arrives, and unknown errors retry it.
func TestUnclearIsrAnswerKeepsExpansionPending(t *testing.T) {
	cases := []struct {
		code    ErrorCode
		reset   bool // the controller said it did not apply the change
		retried bool // the change is submitted again
	}{
		{ErrFencedLeaderEpoch, false, false},
		{ErrNotLeaderOrFollower, false, false},
		{ErrInvalidUpdateVersion, false, false},
		{ErrUnknownTopicOrPartition, false, false},
		{ErrInvalidRequest, false, false},
		{ErrBrokerNotAvailable, false, false}, // the changer is closing: the transport closed under the request
		{ErrStaleBrokerEpoch, false, false},
		{ErrUnknownServerError, false, true},
		{ErrRequestTimedOut, false, true},
		{ErrOperationNotAttempted, true, false},
		{ErrIneligibleReplica, true, false},
	}
	for _, c := range cases {
		t.Run(c.code.String(), func(t *testing.T) {
			changer := &heldIsrChanger{}
			h := newHarness(t, 1, func(cfg *Config) { cfg.MinInsyncReplicas = 2; cfg.IsrChanger = changer })
			h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2}))
			h.fetch(2, fetchAt(0, 1))
			h.fetch(3, fetchAt(0, 1)) // broker 3 is in sync: expansion to {1,2,3}
			if got := changer.submitted(); len(got) != 1 || !slices.Equal(got[0].NewIsr, []int32{1, 2, 3}) {
				t.Fatalf("submitted %+v, want an expansion to [1 2 3]", got)
			}
			changer.answer(0, IsrChangeResult{Error: c.code})

			// A record only broker 2 fetches.
			h.produce(tp0, AcksLeader, "x")
			h.fetch(2, fetchAt(1, 1))
			p, _ := h.describe(tp0)
			if c.reset {
				if p.HighWatermark != 1 {
					t.Fatalf("HW %d, want 1: the controller said the expansion was not applied, so {1,2} is the ISR", p.HighWatermark)
				}
			} else if p.HighWatermark != 0 {
				t.Fatalf("HW %d after %v, want 0: broker 3 may be in the committed ISR and lacks offset 0", p.HighWatermark, c.code)
			}
			submitted := changer.submitted()
			switch {
			case c.retried && (len(submitted) != 2 || !slices.Equal(submitted[1].NewIsr, []int32{1, 2, 3})):
				t.Fatalf("submitted %+v, want the expansion submitted again after %v", submitted, c.code)
			case !c.retried && !c.reset && len(submitted) != 1:
				t.Fatalf("submitted %+v, want nothing new while the change is pending", submitted)
			}
			if !c.reset {
				// Broker 3 catches up: the HW needs it, and now has it.
				h.fetch(3, fetchAt(1, 1))
				if p, _ := h.describe(tp0); p.HighWatermark != 1 {
					t.Fatalf("HW %d once broker 3 has the record, want 1", p.HighWatermark)
				}
			}
		})
	}
}

// A LeaderAndIsr at the same leader epoch with a higher partition epoch
// refreshes the leader's ISR (Kafka's makeLeader takes partitionEpoch >=
// current), so a change left pending by an unclear answer is settled without
// waiting for the next leader epoch; the epoch's start offset and the
// followers' progress stay as they were. The same epoch with the same or an
// older partition epoch is still ignored (STALE_CONTROLLER_EPOCH).
func TestSameLeaderEpochHigherPartitionEpochRefreshesIsr(t *testing.T) {
	changer := &heldIsrChanger{}
	h := newHarness(t, 1, func(cfg *Config) { cfg.MinInsyncReplicas = 2; cfg.IsrChanger = changer })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2}))
	h.produce(tp0, AcksLeader, "a", "b")
	h.fetch(2, fetchAt(2, 1))
	h.fetch(3, fetchAt(2, 1))
	changer.answer(0, IsrChangeResult{Error: ErrFencedLeaderEpoch})
	h.produce(tp0, AcksLeader, "c")
	epochsBefore := h.rm.getPartition(tp0).partition.Log().EpochCache().Entries()

	same := state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2})
	same.IsNew = false
	if code := codeOf(h.leaderAndIsr(1, same), tp0); code != ErrStaleControllerEpoch {
		t.Fatalf("same leader and partition epoch: %v, want STALE_CONTROLLER_EPOCH", code)
	}
	refresh := state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3})
	refresh.PartitionEpoch, refresh.IsNew = 1, false
	if code := codeOf(h.leaderAndIsr(1, refresh), tp0); code != ErrNone {
		t.Fatalf("same leader epoch, higher partition epoch: %v, want NONE", code)
	}
	p, _ := h.describe(tp0)
	if !slices.Equal(p.ISR, []int32{1, 2, 3}) || p.PartitionEpoch != 1 || p.LeaderEpoch != 1 {
		t.Fatalf("after the refresh: ISR %v partition epoch %d leader epoch %d, want [1 2 3], 1, 1", p.ISR, p.PartitionEpoch, p.LeaderEpoch)
	}
	part := h.rm.getPartition(tp0).partition
	part.mu.RLock()
	start, pending := part.leaderEpochStartOffset, part.pendingIsr
	part.mu.RUnlock()
	if start != 0 || pending != nil {
		t.Fatalf("epoch start offset %d, pending change %v; want 0 (the epoch began at offset 0) and none", start, pending)
	}
	if after := part.Log().EpochCache().Entries(); !slices.Equal(after, epochsBefore) {
		t.Fatalf("epoch cache %v, want it untouched: %v", after, epochsBefore)
	}
	// The followers' progress was kept: both fetching at the LEO moves the HW.
	h.fetch(2, fetchAt(3, 1))
	h.fetch(3, fetchAt(3, 1))
	if p, _ := h.describe(tp0); p.HighWatermark != 3 {
		t.Fatalf("HW %d, want 3", p.HighWatermark)
	}
	// A different leader at the same leader epoch is not a refresh.
	moved := state("orders", 0, 2, 1, []int32{1, 2, 3}, []int32{1, 2, 3})
	moved.PartitionEpoch, moved.IsNew = 2, false
	if code := codeOf(h.leaderAndIsr(1, moved), tp0); code != ErrStaleControllerEpoch {
		t.Fatalf("another leader at the same epoch: %v, want STALE_CONTROLLER_EPOCH", code)
	}
}

// A retried ISR change keeps its span open: the retry is an event on it,
// and the span ends with the final outcome (here the commit), so a trace
// shows how the change ended, not only that it was retried.
func TestRetriedIsrChangeSpanEndsWithItsOutcome(t *testing.T) {
	changer := &heldIsrChanger{}
	h, rec, _ := tracedHarness(t, func(cfg *Config) { cfg.MinInsyncReplicas = 2; cfg.IsrChanger = changer })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2}))
	h.fetch(2, fetchAt(0, 1))
	h.fetch(3, fetchAt(0, 1))
	changer.answer(0, IsrChangeResult{Error: ErrRequestTimedOut})
	if n := len(spantest.Named(rec, "Partition.expandIsr")); n != 0 {
		t.Fatalf("%d expandIsr spans ended on a retried answer, want none", n)
	}
	changer.answer(1, IsrChangeResult{Error: ErrNone, Isr: []int32{1, 2, 3}, PartitionEpoch: 1})
	s := oneSpan(t, rec, "Partition.expandIsr")
	wantAttrs(t, "expandIsr", s.Attributes(), map[string]any{"replicad.outcome": string(isrOutcomeCommitted), "replicad.partition_epoch": 1})
	if ev := s.Events(); len(ev) != 1 || ev[0].Name != "retried" {
		t.Fatalf("events %+v, want one retried event", ev)
	}
}
