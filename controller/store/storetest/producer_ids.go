package storetest

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/replicad/replicad/controller/store"
)

// testProducerIDBlocks ensures blocks start at 1, follow each other without
// overlap, refuse a non-positive count with nothing written, and
// LastProducerID names the end of the last.
func testProducerIDBlocks(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got := must(s.LastProducerID(ctx))(t); got != 0 {
		t.Fatalf("last producer id of an empty store = %d, want 0", got)
	}
	if got := must(s.AllocateProducerIDs(ctx, 1000))(t); got != 1 {
		t.Fatalf("first block starts at %d, want 1", got)
	}
	if got := must(s.AllocateProducerIDs(ctx, 10))(t); got != 1001 {
		t.Fatalf("second block starts at %d, want 1001", got)
	}
	for _, n := range []int32{0, -5} {
		if _, err := s.AllocateProducerIDs(ctx, n); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("count %d: %v, want ErrInvalid", n, err)
		}
	}
	if got := must(s.LastProducerID(ctx))(t); got != 1010 {
		t.Fatalf("last producer id = %d, want 1010", got)
	}
}

// testConcurrentProducerIDBlocks ensures concurrent allocations get
// disjoint blocks that together cover 1..n*count.
func testConcurrentProducerIDBlocks(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n, count = 8, 100
	firsts := make([]int64, n)
	errs := make([]error, n)
	together(n, func(i int) { firsts[i], errs[i] = s.AllocateProducerIDs(ctx, count) })
	noErrors(t, errs)
	seen := map[int64]bool{}
	for _, f := range firsts {
		if (f-1)%count != 0 || f < 1 || f > n*count || seen[f] {
			t.Fatalf("blocks start at %v: want distinct multiples of %d plus 1", firsts, count)
		}
		seen[f] = true
	}
}

// testProducerEpochBumps ensures a bump from the newest epoch succeeds once,
// a second bump from the same epoch is ErrConflict, an ID never issued is
// ErrNotFound, and the largest epoch is ErrInvalid.
func testProducerEpochBumps(t *testing.T, s store.Store) {
	ctx := context.Background()
	first := must(s.AllocateProducerIDs(ctx, 5))(t)
	if got := must(s.BumpProducerEpoch(ctx, first, 0))(t); got != 1 {
		t.Fatalf("bump from 0 = %d, want 1", got)
	}
	if _, err := s.BumpProducerEpoch(ctx, first, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second bump from 0: %v, want ErrConflict", err)
	}
	if _, err := s.BumpProducerEpoch(ctx, first, 7); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("bump from an epoch never handed out: %v, want ErrConflict", err)
	}
	if got := must(s.BumpProducerEpoch(ctx, first, 1))(t); got != 2 {
		t.Fatalf("bump from 1 = %d, want 2", got)
	}
	// Another ID of the block is untouched by the first one's bumps.
	if got := must(s.BumpProducerEpoch(ctx, first+4, 0))(t); got != 1 {
		t.Fatalf("bump of another id = %d, want 1", got)
	}
	for _, id := range []int64{0, -1, first + 5} {
		if _, err := s.BumpProducerEpoch(ctx, id, 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("bump of id %d, never issued: %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.BumpProducerEpoch(ctx, first+1, -1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bump from a negative epoch: %v, want ErrInvalid", err)
	}
	// Walking an ID up to the largest epoch takes 32767 writes; a fresh
	// ID refuses a bump from MaxInt16 as a conflict first (its epoch is
	// 0), so the exhaustion check is the decision function's.
	if _, err := s.BumpProducerEpoch(ctx, first+2, math.MaxInt16); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("bump of a fresh id from %d: %v, want ErrConflict", math.MaxInt16, err)
	}
}

// testConcurrentProducerEpochBumps ensures that of concurrent bumps from the
// same epoch exactly one succeeds.
func testConcurrentProducerEpochBumps(t *testing.T, s store.Store) {
	ctx := context.Background()
	id := must(s.AllocateProducerIDs(ctx, 1))(t)
	const n = 8
	var mu sync.Mutex
	won := 0
	errs := make([]error, n)
	together(n, func(i int) {
		_, err := s.BumpProducerEpoch(ctx, id, 0)
		if err == nil {
			mu.Lock()
			won++
			mu.Unlock()
		} else if !errors.Is(err, store.ErrConflict) {
			errs[i] = err
		}
	})
	noErrors(t, errs)
	if won != 1 {
		t.Fatalf("%d concurrent bumps from epoch 0 succeeded, want 1", won)
	}
}

// testProducerIDsPersist ensures the end of the last block and the bumped
// epochs survive a restart: the next block starts after it and an old
// epoch stays refused.
func testProducerIDsPersist(t *testing.T, s store.Store, restart func(store.Store) store.Store) {
	ctx := context.Background()
	first := must(s.AllocateProducerIDs(ctx, 1000))(t)
	if _, err := s.BumpProducerEpoch(ctx, first, 0); err != nil {
		t.Fatal(err)
	}
	s = restart(s)
	if got := must(s.AllocateProducerIDs(ctx, 1000))(t); got != first+1000 {
		t.Fatalf("block after restart starts at %d, want %d", got, first+1000)
	}
	if _, err := s.BumpProducerEpoch(ctx, first, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("bump from the old epoch after restart: %v, want ErrConflict", err)
	}
	if got := must(s.BumpProducerEpoch(ctx, first, 1))(t); got != 2 {
		t.Fatalf("bump from 1 after restart = %d, want 2", got)
	}
}
