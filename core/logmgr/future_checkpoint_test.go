package logmgr

import (
	"path/filepath"
	"testing"
)

// A truncation of a future log has the future's own dir checkpoint the
// lowered recovery point, before the cut and without being asked; the
// current log's dir is left alone.
func TestTruncationCheckpointsTheLoweredRecoveryPoint(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	p := tpOf("t", 0)
	_, fut, _ := copiedToFuture(t, m, dirs, p)
	curDir, _ := m.DirOf(p)
	dest := filepath.Dir(fut.Dir())
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
	if got, want := readFile(t, rp), "0\n1\nt 0 2\n"; got != want {
		t.Fatalf("%s = %q after the truncation, want %q", rp, got, want)
	}
	if got, want := readFile(t, filepath.Join(curDir, RecoveryPointCheckpoint)), "0\n1\nt 0 5\n"; got != want {
		t.Fatalf("current dir's recovery points %q, want %q", got, want)
	}
	if _, ok := failure(m); ok {
		t.Fatal("a dir failure was reported")
	}
}
