package logmgr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// A future log found damaged at rest when the manager opens is cut at the
// damage at once: it is only a copy of its current log, which the move
// copies the rest from again. The current log is left alone.
func TestDamagedFutureLogIsRepairedAtOpen(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	p := tpOf("t", 0)
	_, fut, batches := copiedToFuture(t, m, dirs, p)
	futDir := fut.Dir()
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// Damage the future's third batch, below its recovery point; without
	// the index, recovery reads the segment and meets it.
	segment := filepath.Join(futDir, "00000000000000000000.log")
	data, err := os.ReadFile(segment)
	if err != nil {
		t.Fatal(err)
	}
	size := len(batches) / 5
	data[2*size+record.HeaderSize+2] ^= 0xff
	if err := os.WriteFile(segment, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(futDir, "00000000000000000000.index"))

	m = open(t, dirs...)
	fut, ok := m.FutureLog(p)
	if !ok {
		t.Fatal("no future log after the restart")
	}
	if d, ok := fut.Damaged(); ok {
		t.Fatalf("the future log is still damaged: %+v", d)
	}
	if leo := fut.LogEndOffset(); leo != 2 {
		t.Fatalf("future log end %d, want 2: cut at the damage", leo)
	}
	if cur, _ := m.GetLog(p); cur.LogEndOffset() != 5 {
		t.Fatalf("current log end %d, want 5", cur.LogEndOffset())
	}
	if _, err := fut.AppendAsFollower(batches[2*size:]); err != nil {
		t.Fatalf("the move copies on after the repair: %v", err)
	}
}

// A log that recovery truncates fully while the manager opens (its log end
// is below its checkpointed log start) does not have the dir's checkpoints
// written from the logs registered so far: the other logs of the dir would
// lose their recovery points and log starts.
func TestFullTruncationAtOpenKeepsTheDirsCheckpoints(t *testing.T) {
	dir := tempDirs(t, 1)[0]
	m := open(t, dir)
	p0, p1 := tpOf("t", 0), tpOf("t", 1)
	create(t, m, p0, p1)
	appendRecords(t, m, p0, 5)
	appendRecords(t, m, p1, 5)
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	starts := filepath.Join(dir, LogStartOffsetCheckpoint)
	if err := checkpoint.WriteOffsets(vfs.OS, starts, map[tp.TopicPartition]int64{p0: 0, p1: 10}, true); err != nil {
		t.Fatal(err)
	}

	m = open(t, dir)
	if l, _ := m.GetLog(p1); l.LogStartOffset() != 10 || l.LogEndOffset() != 10 {
		t.Fatalf("t-1 starts at %d, ends at %d; want both 10", l.LogStartOffset(), l.LogEndOffset())
	}
	rps, err := checkpoint.ReadOffsets(vfs.OS, filepath.Join(dir, RecoveryPointCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if rps[p0] != 5 {
		t.Fatalf("recovery points on disk %v, want t-0 at 5", rps)
	}
	got, err := checkpoint.ReadOffsets(vfs.OS, starts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[p0]; !ok {
		t.Fatalf("log starts on disk %v, want t-0's kept", got)
	}
}

// A future log that failed (here: an fsync of it failed) is never swapped
// in for its current log: writes since the failure may be lost. The
// replacement fails and both logs stay where they are.
func TestFailedFutureLogIsNotSwappedIn(t *testing.T) {
	fsys := crashfs.New()
	dirs := []string{"/d/a", "/d/b"}
	cfg := crashConfig(fsys, dirs...)
	cfg.LogConfig.FlushPolicy = log.FlushInterval
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	p := tpOf("t", 0)
	cur, fut, _ := copiedToFuture(t, m, dirs, p)
	fsys.SetFault(func(op crashfs.Op) error {
		if op.Kind == crashfs.OpSync && strings.HasPrefix(op.Path, fut.Dir()) {
			return syscall.EIO
		}
		return nil
	})
	if err := fut.Flush(); !errors.Is(err, log.ErrStorage) {
		t.Fatalf("flush of the future log: %v, want a storage error", err)
	}
	fsys.SetFault(nil)
	if _, err := m.ReplaceCurrentWithFutureLog(p, 5); err == nil {
		t.Fatal("a failed future log was swapped in")
	}
	if l, ok := m.GetLog(p); !ok || l != cur || l.LogEndOffset() != 5 {
		t.Fatalf("current log after the refused swap: %v %v", l, ok)
	}
}

// Running out of file descriptors is no fault of a dir: a checkpoint that
// could not open its file fails, the dir stays online. But a log that
// failed itself for it (a truncation cut partway) takes no more writes, so
// its dir must go offline to reopen it.
func TestOutOfDescriptorsTakesADirOfflineOnlyWhenALogFailed(t *testing.T) {
	fsys := crashfs.New()
	dir := "/d/a"
	m, err := Open(crashConfig(fsys, dir))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	p := tpOf("t", 0)
	create(t, m, p)
	appendRecords(t, m, p, 3)
	l, _ := m.GetLog(p)
	emfile := func(suffix string) {
		fsys.SetFault(func(op crashfs.Op) error {
			if op.Kind == crashfs.OpOpen && strings.HasSuffix(op.Path, suffix) {
				return syscall.EMFILE
			}
			return nil
		})
	}
	emfile(RecoveryPointCheckpoint + ".tmp")
	if failed := m.CheckpointLogOffsets(); !errors.Is(failed[dir], log.ErrFileLimit) {
		t.Fatalf("checkpoint without a descriptor: %v, want log.ErrFileLimit", failed)
	}
	if f, ok := failure(m); ok {
		t.Fatalf("running out of descriptors in a checkpoint took the dir offline: %+v", f)
	}
	// The new segment of a full truncation cannot be opened: the old ones
	// are gone, the log has failed.
	emfile("00000000000000000009.log")
	if err := l.TruncateFullyAndStartAt(9); !errors.Is(err, log.ErrStorage) {
		t.Fatalf("full truncation without a descriptor: %v, want the log failed", err)
	}
	fsys.SetFault(nil)
	if f, ok := failure(m); !ok || f.Dir != dir {
		t.Fatalf("failure %+v, %v: want the failed log's dir %s reported", f, ok, dir)
	}
}
