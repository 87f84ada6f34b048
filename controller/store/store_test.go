package store_test

import (
	"testing"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/controller/store/storetest"
)

func openBolt(t *testing.T) store.Store {
	t.Helper()
	s, err := store.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatalf("open bolt: %v", err)
	}
	return s
}

func reopenBolt(t *testing.T, closed store.Store) store.Store {
	t.Helper()
	s, err := store.OpenBolt(closed.(*store.BoltStore).Dir())
	if err != nil {
		t.Fatalf("reopen bolt: %v", err)
	}
	return s
}

// TestBolt ensures the bbolt store meets the shared contract and survives restarts.
func TestBolt(t *testing.T) {
	storetest.RunSuite(t, openBolt)
	t.Run("Durability", func(t *testing.T) {
		storetest.RunDurabilitySuite(t, openBolt, reopenBolt)
	})
}

// TestMemory ensures the in-memory store meets the shared contract.
func TestMemory(t *testing.T) {
	storetest.RunSuite(t, func(*testing.T) store.Store { return store.NewMemory() })
}
