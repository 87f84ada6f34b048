package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/replicad/replicad/controller/store"
)

// Each kind of fault does what it says to the write it hits, and only to
// as many writes as it is given.
func TestFaulty(t *testing.T) {
	ctx := context.Background()
	f := NewFaulty(store.NewMemory())
	if err := f.CreateTopic(ctx, "t", []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	bump := func(epoch int32) store.PartitionUpdate {
		return store.PartitionUpdate{Expected: epoch, New: store.Partition{Topic: "t", Leader: 1, ISR: []int32{1}, Replicas: []int32{1}, PartitionEpoch: epoch + 1}}
	}
	stored := func() int32 {
		p, err := f.Partition(ctx, "t", 0)
		if err != nil {
			t.Fatal(err)
		}
		return p.PartitionEpoch
	}

	f.Inject(Fault{Op: OpUpdatePartitions, Kind: LandThenFail})
	if err := f.UpdatePartitions(ctx, []store.PartitionUpdate{bump(0)}); !errors.Is(err, ErrTimedOut) || stored() != 1 {
		t.Fatalf("LandThenFail: %v, stored epoch %d; want ErrTimedOut with the write applied", err, stored())
	}
	boom := errors.New("boom")
	f.Inject(Fault{Op: OpUpdatePartitions, Kind: FailBefore, Err: boom, Times: 2})
	for range 2 {
		if err := f.UpdatePartitions(ctx, []store.PartitionUpdate{bump(1)}); !errors.Is(err, boom) || stored() != 1 {
			t.Fatalf("FailBefore: %v, stored epoch %d; want boom with nothing written", err, stored())
		}
	}
	if err := f.UpdatePartitions(ctx, []store.PartitionUpdate{bump(1)}); err != nil || stored() != 2 {
		t.Fatalf("after the fault was spent: %v, stored epoch %d", err, stored())
	}
	f.Inject(Fault{Op: OpUpdatePartitions, Kind: Slow, Delay: 50 * time.Millisecond})
	sctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
	err := f.UpdatePartitions(sctx, []store.PartitionUpdate{bump(2)})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || stored() != 3 {
		t.Fatalf("Slow: %v, stored epoch %d; want the caller's deadline with the write applied", err, stored())
	}
	f.Inject(Fault{Kind: FailBefore, Times: -1, Match: func(c Call) bool { return c.Broker.ID == 7 }})
	if _, err := f.RegisterBroker(ctx, store.Broker{ID: 1}); err != nil {
		t.Fatalf("a write the fault does not match: %v", err)
	}
	for range 3 {
		if _, err := f.RegisterBroker(ctx, store.Broker{ID: 7}); !errors.Is(err, ErrTimedOut) {
			t.Fatalf("a matched write: %v, want ErrTimedOut", err)
		}
	}
	f.Clear()
	if _, err := f.RegisterBroker(ctx, store.Broker{ID: 7}); err != nil {
		t.Fatalf("after Clear: %v", err)
	}
	if f.Calls(OpUpdatePartitions) != 5 || f.Hits(OpUpdatePartitions) != 4 || f.Hits(OpRegisterBroker) != 3 {
		t.Fatalf("calls %d, hits %d and %d; want 5, 4, 3", f.Calls(OpUpdatePartitions), f.Hits(OpUpdatePartitions), f.Hits(OpRegisterBroker))
	}
}
