package core

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/core/clock"
)

// The token bucket starts empty at a new rate, refills at the rate up to
// one second's worth, lets a read go into debt (paid before the next read),
// and takes back what an unsent answer gave.
func TestTokenBucketRefillsAtTheRate(t *testing.T) {
	c := clock.NewManual(time.Unix(1_700_000_000, 0))
	b := newTokenBucket(c.Now)
	if n, on := b.available(); on || n != math.MaxInt {
		t.Fatalf("no throttle: available %d on %v, want unlimited and off", n, on)
	}
	if !b.set(1, ReplicationThrottle{BytesPerSec: 1000, Version: 1}) {
		t.Fatal("first throttle not applied")
	}
	if n, on := b.available(); !on || n != 0 {
		t.Fatalf("new throttle: available %d, want 0 (no burst)", n)
	}
	c.Advance(250 * time.Millisecond)
	if n, _ := b.available(); n != 250 {
		t.Fatalf("after 250ms at 1000 B/s: %d, want 250", n)
	}
	b.take(600) // a first batch bigger than the tokens: 350 bytes of debt
	c.Advance(300 * time.Millisecond)
	if n, _ := b.available(); n != 0 {
		t.Fatalf("still in debt after 300ms: %d, want 0", n)
	}
	c.Advance(100 * time.Millisecond)
	if n, _ := b.available(); n != 50 {
		t.Fatalf("debt paid after 400ms: %d, want 50", n)
	}
	c.Advance(time.Hour)
	if n, _ := b.available(); n != 1000 {
		t.Fatalf("idle for an hour: %d, want the 1s burst of 1000", n)
	}
	b.take(1000)
	b.giveBack(400)
	if n, _ := b.available(); n != 400 {
		t.Fatalf("after giving back 400: %d, want 400", n)
	}
	if s := b.stats(); s.BytesPerSec != 1000 || s.ThrottledBytes != 1200 || s.ThrottledReads != 2 {
		t.Fatalf("stats %+v, want rate 1000, 1200 bytes, 2 empty reads", s)
	}
}

// A throttle older than the one in force (by controller epoch, then
// version) is ignored; a newer one, or one of a newer controller, applies;
// 0 removes the throttle.
func TestTokenBucketOrdersThrottles(t *testing.T) {
	c := clock.NewManual(time.Unix(1_700_000_000, 0))
	b := newTokenBucket(c.Now)
	b.set(2, ReplicationThrottle{BytesPerSec: 500, Version: 5})
	for _, stale := range []struct {
		epoch int32
		v     int64
	}{{2, 4}, {1, 9}} {
		if b.set(stale.epoch, ReplicationThrottle{BytesPerSec: 0, Version: stale.v}) {
			t.Fatalf("epoch %d version %d applied over (2, 5)", stale.epoch, stale.v)
		}
	}
	if s := b.stats(); s.BytesPerSec != 500 {
		t.Fatalf("rate %d after stale throttles, want 500", s.BytesPerSec)
	}
	if !b.set(3, ReplicationThrottle{BytesPerSec: 0, Version: 1}) {
		t.Fatal("a newer controller's removal was ignored")
	}
	if _, on := b.available(); on {
		t.Fatal("throttle still on after removal")
	}
}

// The leader holds back fetches of a replica being added, outside the ISR,
// to the rate, and never a fetch of an ISR member, whatever the budget.
func TestLeaderThrottlesOnlyFollowersOutsideTheIsr(t *testing.T) {
	h := newHarness(t, 1)
	// Replicas 1 (this leader), 2 in the ISR, 3 being added (not in it).
	st := state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2})
	st.AddingReplicas = []int32{3}
	h.leaderAndIsr(1, st)
	value := strings.Repeat("x", 1000)
	for range 20 {
		h.produce(tp0, AcksLeader, value)
	}
	ctx := context.Background()
	code := h.rm.UpdateMetadata(ctx, UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1,
		Throttle: &ReplicationThrottle{BytesPerSec: 2000, Version: 1}})
	if code != ErrNone {
		t.Fatalf("UpdateMetadata: %v", code)
	}
	// The ISR member reads everything at once, every time.
	if r := h.fetch(2, fetchAt(0, 1)); len(batchBases(t, r.Records)) != 20 {
		t.Fatalf("ISR follower got %d batches, want all 20", len(batchBases(t, r.Records)))
	}
	// Its next fetch moves the HW to 20: replica 3, below it, is not in sync.
	if r := h.fetch(2, fetchAt(20, 1)); r.Error != ErrNone || r.HighWatermark != 20 {
		t.Fatalf("ISR follower at 20: %v, HW %d", r.Error, r.HighWatermark)
	}
	// The added replica gets nothing from the empty bucket, then about a
	// rate's worth per second of waiting.
	if r := h.fetch(3, fetchAt(0, 1)); len(r.Records) != 0 || r.Error != ErrNone {
		t.Fatalf("throttled follower with no budget: %d bytes, %v; want none", len(r.Records), r.Error)
	}
	// A follower whose fetch comes back empty asks again after its max
	// wait: every 250ms here, for 5s.
	var got int64
	offset := int64(0)
	for range 20 {
		h.clock.Advance(250 * time.Millisecond)
		r := h.fetch(3, fetchAt(offset, 1))
		if r.Error != ErrNone {
			t.Fatal(r.Error)
		}
		if bases := batchBases(t, r.Records); len(bases) > 0 {
			offset = bases[len(bases)-1] + 1
		}
		got += int64(len(r.Records))
	}
	// 5s at 2000 B/s: a read takes no more than the tokens there are but
	// for a first batch, always whole, whose excess is a debt: at most the
	// rate's bytes plus one batch (and not much less: remainders carry
	// over).
	if got > 5*2000+1100 || got < 4*2000 {
		t.Fatalf("throttled follower read %d bytes in 5s at 2000 B/s, want 8000-11100", got)
	}
	// The budget is spent; the ISR member still fetches new data at once.
	h.produce(tp0, AcksLeader, value)
	if r := h.fetch(2, fetchAt(20, 1)); len(batchBases(t, r.Records)) != 1 {
		t.Fatalf("ISR follower after the budget was spent: %d batches, want 1", len(batchBases(t, r.Records)))
	}
	if s := h.rm.ReplicationThrottleStats(); s.ThrottledBytes != got || s.ThrottledReads == 0 {
		t.Fatalf("stats %+v, want %d throttled bytes and some empty reads", s, got)
	}
	// Removed: the added replica reads the rest at once.
	h.rm.UpdateMetadata(ctx, UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1,
		Throttle: &ReplicationThrottle{BytesPerSec: 0, Version: 2}})
	if r := h.fetch(3, fetchAt(offset, 1)); len(batchBases(t, r.Records)) != int(21-offset) {
		t.Fatalf("after removal: %d batches from %d, want %d", len(batchBases(t, r.Records)), offset, 21-offset)
	}
}

// Only the replicas a reassignment adds are throttled (Kafka's
// follower.replication.throttled.replicas, the moving ones): a follower
// outside the ISR that is not being added, one back from a restart, reads at
// full speed while the throttle's budget is spent, and does not spend it. So
// does a replica that was being added once its reassignment is over.
func TestLeaderThrottlesOnlyReplicasBeingAdded(t *testing.T) {
	h := newHarness(t, 1)
	// Replicas 1 (this leader), 2 in the ISR, 3 back from a restart (out of
	// the ISR), 4 being added.
	st := state("orders", 0, 1, 1, []int32{1, 2, 3, 4}, []int32{1, 2})
	st.AddingReplicas = []int32{4}
	h.leaderAndIsr(1, st)
	value := strings.Repeat("x", 1000)
	for range 20 {
		h.produce(tp0, AcksLeader, value)
	}
	if code := h.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1,
		Throttle: &ReplicationThrottle{BytesPerSec: 2000, Version: 1}}); code != ErrNone {
		t.Fatalf("UpdateMetadata: %v", code)
	}
	// A new rate starts with an empty bucket: the adding replica gets
	// nothing...
	if r := h.fetch(4, fetchAt(0, 1)); len(r.Records) != 0 || r.Error != ErrNone {
		t.Fatalf("replica being added, no budget: %d bytes, %v; want none", len(r.Records), r.Error)
	}
	// ...while the restarted follower reads everything at once.
	if r := h.fetch(3, fetchAt(0, 1)); r.Error != ErrNone || len(batchBases(t, r.Records)) != 20 {
		t.Fatalf("follower outside the ISR, not being added: %d batches, %v; want all 20 (throttled?)",
			len(batchBases(t, r.Records)), r.Error)
	}
	if s := h.rm.ReplicationThrottleStats(); s.ThrottledBytes != 0 {
		t.Fatalf("stats %+v: the follower not being added was counted under the throttle", s)
	}
	// The reassignment completes: 4 stays a replica, no longer being added
	// (the same leadership, a newer partition epoch), and reads at once too.
	done := state("orders", 0, 1, 1, []int32{1, 2, 3, 4}, []int32{1, 2})
	done.PartitionEpoch, done.IsNew = 1, false
	h.leaderAndIsr(1, done)
	if r := h.fetch(4, fetchAt(0, 1)); r.Error != ErrNone || len(batchBases(t, r.Records)) != 20 {
		t.Fatalf("replica once added, after the reassignment: %d batches, %v; want all 20", len(batchBases(t, r.Records)), r.Error)
	}
}
