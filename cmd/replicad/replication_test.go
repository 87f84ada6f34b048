package main

import (
	"errors"
	"testing"

	"github.com/replicad/replicad/fetcher"
)

// truncations counts the truncations that reach the wrapped replica.
type truncations struct {
	fetcher.Replica
	n   int
	err error
}

func (r *truncations) TruncateTo(int64) error              { r.n++; return r.err }
func (r *truncations) TruncateFullyAndStartAt(int64) error { r.n++; return r.err }

// Every successful truncation of a follower's log is followed by a
// recovery-point checkpoint, and a failed one is not.
func TestTruncationWritesTheRecoveryPointCheckpoint(t *testing.T) {
	inner := &truncations{}
	checkpoints := 0
	r := checkpointingReplica{Replica: inner, checkpoint: func() error { checkpoints++; return nil }}
	if err := r.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if err := r.TruncateFullyAndStartAt(9); err != nil {
		t.Fatal(err)
	}
	if inner.n != 2 || checkpoints != 2 {
		t.Fatalf("truncations %d checkpoints %d, want 2 and 2", inner.n, checkpoints)
	}
	inner.err = errors.New("disk gone")
	if err := r.TruncateTo(1); err == nil || checkpoints != 2 {
		t.Fatalf("failed truncation: err %v, checkpoints %d", err, checkpoints)
	}
}
