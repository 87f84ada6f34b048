package logmgr

import (
	"path/filepath"
	"testing"
)

// Ensures CheckpointLogOffsetsOfFuture writes a truncated future log's lowered recovery point to the future's own dir, which CheckpointLogOffsetsOf leaves stale.
func TestCheckpointLogOffsetsOfFutureAfterTruncation(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	p := tpOf("t", 0)
	if err := m.CheckpointLogOffsetsOfFuture(p); err != nil {
		t.Fatalf("no future log: %v", err)
	}
	create(t, m, p)
	appendRecords(t, m, p, 5)
	cur, _ := m.GetLog(p)
	curDir, _ := m.DirOf(p)
	dest := dirs[0]
	if curDir == dest {
		dest = dirs[1]
	}
	fut, err := m.GetOrCreateFutureLog(p, dest)
	if err != nil {
		t.Fatal(err)
	}
	ri, err := cur.Read(0, 1<<20, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fut.AppendAsFollower(ri.Data); err != nil {
		t.Fatal(err)
	}
	if err := m.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if failed := m.CheckpointLogOffsets(); len(failed) != 0 {
		t.Fatal(failed)
	}
	rp := filepath.Join(dest, RecoveryPointCheckpoint)
	if got, want := readFile(t, rp), "0\n1\nt 0 5\n"; got != want {
		t.Fatalf("%s = %q before the truncation, want %q", rp, got, want)
	}

	if err := fut.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if fut.RecoveryPoint() != 2 {
		t.Fatalf("future recovery point %d after truncating to 2", fut.RecoveryPoint())
	}
	// The current log's variant checkpoints only the current log's dir.
	if err := m.CheckpointLogOffsetsOf(p); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, rp); got != "0\n1\nt 0 5\n" {
		t.Fatalf("CheckpointLogOffsetsOf wrote the future's dir: %q", got)
	}
	if err := m.CheckpointLogOffsetsOfFuture(p); err != nil {
		t.Fatal(err)
	}
	if got, want := readFile(t, rp), "0\n1\nt 0 2\n"; got != want {
		t.Fatalf("%s = %q, want %q", rp, got, want)
	}
	if got, want := readFile(t, filepath.Join(curDir, RecoveryPointCheckpoint)), "0\n1\nt 0 5\n"; got != want {
		t.Fatalf("current dir's recovery points %q, want %q", got, want)
	}
	if _, ok := failure(m); ok {
		t.Fatal("a dir failure was reported")
	}
}
