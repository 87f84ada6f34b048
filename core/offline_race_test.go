package core

import (
	"errors"
	"sync"
	"testing"
)

// Requests looking up a partition while its log dir fails see either the
// online partition or STORAGE_ERROR, with no data race on the hosting state
// (run under -race).
func TestLookupsRaceWithDirFailure(t *testing.T) {
	h := newHarness(t, 2)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	dir, _ := h.rm.logs.DirOf(tp0)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, code := h.rm.onlinePartition(tp0); code != ErrNone && code != ErrStorageError {
				t.Errorf("lookup: %v", code)
				return
			}
			h.rm.Describe("", nil)
		}
	})
	h.rm.handleLogDirFailure(dir, errors.New("disk gone"))
	close(stop)
	wg.Wait()
	if _, code := h.rm.onlinePartition(tp0); code != ErrStorageError {
		t.Fatalf("after the failure: %v, want STORAGE_ERROR", code)
	}
}
