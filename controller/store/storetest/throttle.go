package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/replicad/replicad/controller/store"
)

// testReplicationThrottle ensures the throttle reads 0 until set, holds the
// last value set, refuses a negative one with ErrInvalid (keeping the old),
// and goes back to 0 when removed.
func testReplicationThrottle(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got := must(s.ReplicationThrottle(ctx))(t); got != 0 {
		t.Fatalf("throttle of an empty store = %d, want 0", got)
	}
	for _, v := range []int64{1 << 20, 4096} {
		if err := s.SetReplicationThrottle(ctx, v); err != nil {
			t.Fatal(err)
		}
		if got := must(s.ReplicationThrottle(ctx))(t); got != v {
			t.Fatalf("throttle = %d, want %d", got, v)
		}
	}
	if err := s.SetReplicationThrottle(ctx, -1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("negative throttle: %v, want ErrInvalid", err)
	}
	if got := must(s.ReplicationThrottle(ctx))(t); got != 4096 {
		t.Fatalf("throttle after a refused set = %d, want 4096", got)
	}
	if err := s.SetReplicationThrottle(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if got := must(s.ReplicationThrottle(ctx))(t); got != 0 {
		t.Fatalf("throttle after removal = %d, want 0", got)
	}
}

// testReplicationThrottlePersists ensures the throttle survives a restart.
func testReplicationThrottlePersists(t *testing.T, s store.Store, restart func(store.Store) store.Store) {
	ctx := context.Background()
	if err := s.SetReplicationThrottle(ctx, 123456); err != nil {
		t.Fatal(err)
	}
	s = restart(s)
	if got := must(s.ReplicationThrottle(ctx))(t); got != 123456 {
		t.Fatalf("throttle after restart = %d, want 123456", got)
	}
}
