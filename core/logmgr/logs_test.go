package logmgr

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// Ensures a new log goes to the online dir with the fewest partitions, the first in config order on a tie, at <dir>/<topic>-<partition>.
func TestNewLogGoesToDirWithFewestPartitions(t *testing.T) {
	dirs := tempDirs(t, 3)
	// dirs[0] already holds two logs, dirs[1] one.
	m := open(t, dirs...)
	create(t, m, tpOf("pre", 0), tpOf("pre", 1), tpOf("pre", 2))
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dirs[2], "pre-2"), filepath.Join(dirs[0], "pre-2")); err != nil {
		t.Fatal(err)
	}
	m = open(t, dirs...) // counts: 2, 1, 0
	want := []string{dirs[2], dirs[1], dirs[2], dirs[0], dirs[1], dirs[2]}
	for i, dir := range want {
		p := tpOf("new", int32(i))
		l, err := m.GetOrCreateLog(p, false)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := m.DirOf(p); got != dir {
			t.Fatalf("log %d went to %s, want %s", i, got, dir)
		}
		if l.Dir() != filepath.Join(dir, "new-"+strconv.Itoa(i)) {
			t.Fatalf("log dir %s", l.Dir())
		}
	}
	for _, d := range m.Dirs() {
		if d.Partitions != 3 {
			t.Fatalf("dir %s holds %d partitions, want 3", d.Path, d.Partitions)
		}
	}
}

// Ensures GetOrCreateLog returns the existing log instead of creating another, also under concurrent calls.
func TestGetOrCreateLogIsIdempotent(t *testing.T) {
	m := open(t, tempDirs(t, 2)...)
	p := tpOf("t", 0)
	logs := make([]*log.Log, 8)
	var wg sync.WaitGroup
	for i := range logs {
		wg.Go(func() {
			l, err := m.GetOrCreateLog(p, false)
			if err != nil {
				t.Error(err)
			}
			logs[i] = l
		})
	}
	wg.Wait()
	for _, l := range logs {
		if l != logs[0] || l == nil {
			t.Fatal("GetOrCreateLog returned different logs for one partition")
		}
	}
	if got := len(m.Logs()); got != 1 {
		t.Fatalf("%d logs, want 1", got)
	}
	total := 0
	for _, d := range m.Dirs() {
		total += d.Partitions
	}
	if total != 1 {
		t.Fatalf("dirs count %d partitions, want 1", total)
	}
}

// Ensures a partition name that is not a legal topic-partition cannot become a path.
func TestGetOrCreateLogRejectsIllegalNames(t *testing.T) {
	m := open(t, tempDirs(t, 1)...)
	for _, p := range []tp.TopicPartition{tpOf("../escape", 0), tpOf("", 0), tpOf("t", -1)} {
		if _, err := m.GetOrCreateLog(p, true); err == nil {
			t.Errorf("GetOrCreateLog(%q, %d) succeeded", p.Topic, p.Partition)
		}
	}
	if len(m.Logs()) != 0 {
		t.Fatal("a log was created")
	}
}

// Ensures a reopened manager loads every existing log, in its dir, with its data, and after a clean shutdown recovery starts at the log end.
func TestReopenLoadsExistingLogs(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	parts := []tp.TopicPartition{tpOf("a", 0), tpOf("a", 1), tpOf("b", 0), tpOf("c.x_y-z", 12)}
	create(t, m, parts...)
	where := make(map[tp.TopicPartition]string)
	for i, p := range parts {
		appendRecords(t, m, p, i+1)
		where[p], _ = m.DirOf(p)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	cfg := config(dirs...)
	cfg.RecoveryThreadsPerDir = 2
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	if got := len(m.Logs()); got != len(parts) {
		t.Fatalf("loaded %d logs, want %d", got, len(parts))
	}
	for i, p := range parts {
		l, ok := m.GetLog(p)
		if !ok {
			t.Fatalf("%s not loaded", p)
		}
		if got := l.LogEndOffset(); got != int64(i+1) {
			t.Errorf("%s LEO = %d, want %d", p, got, i+1)
		}
		if got := l.RecoveryPoint(); got != int64(i+1) {
			t.Errorf("%s recovery point = %d, want %d (from the checkpoint)", p, got, i+1)
		}
		if dir, _ := m.DirOf(p); dir != where[p] {
			t.Errorf("%s loaded from %s, was in %s", p, dir, where[p])
		}
	}
}

// Ensures DeleteLog removes the partition's dir and forgets it, in memory, in the checkpoints and on the next start.
func TestDeleteLog(t *testing.T) {
	dirs := tempDirs(t, 1)
	m := open(t, dirs...)
	gone, kept := tpOf("gone", 0), tpOf("kept", 0)
	create(t, m, gone, kept)
	appendRecords(t, m, gone, 3)
	if err := m.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if failed := m.CheckpointLogOffsets(); len(failed) != 0 {
		t.Fatal(failed)
	}
	if err := m.DeleteLog(gone); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.GetLog(gone); ok {
		t.Fatal("GetLog still finds the deleted log")
	}
	if exists(t, filepath.Join(dirs[0], "gone-0")) {
		t.Fatal("partition dir still there")
	}
	if got := dirInfo(t, m, dirs[0]).Partitions; got != 1 {
		t.Fatalf("dir holds %d partitions, want 1", got)
	}
	if got := readFile(t, filepath.Join(dirs[0], RecoveryPointCheckpoint)); got != "0\n1\nkept 0 0\n" {
		t.Fatalf("recovery points after delete = %q", got)
	}
	if err := m.DeleteLog(gone); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "gone") {
			t.Fatalf("%s left behind", e.Name())
		}
	}
	m = open(t, dirs...)
	if _, ok := m.GetLog(gone); ok {
		t.Fatal("deleted log loaded again")
	}
	if _, ok := m.GetLog(kept); !ok {
		t.Fatal("kept log not loaded")
	}
}

// Ensures Open loads only <topic>-<partition> dirs: it removes deleted logs and leaves .tmp dirs and foreign dirs alone
// (future replicas are loaded: see future_test.go).
func TestOpenSkipsNonLogDirs(t *testing.T) {
	dirs := tempDirs(t, 1)
	d := dirs[0]
	writeFile(t, filepath.Join(d, "t-0.0123abcd-delete", "00000000000000000000.log"), "x")
	writeFile(t, filepath.Join(d, "t-2.tmp", "keep"), "x")
	writeFile(t, filepath.Join(d, "lost+found", "keep"), "x")
	writeFile(t, filepath.Join(d, "u-3"), "a file, not a dir")
	m := open(t, dirs...)
	if logs := m.Logs(); len(logs) != 0 {
		t.Fatalf("loaded %v", logs)
	}
	if !dirInfo(t, m, d).Online {
		t.Fatal("dir offline")
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if exists(t, filepath.Join(d, "t-0.0123abcd-delete")) {
		t.Error("deleted log not removed")
	}
	for _, keep := range []string{"t-2.tmp/keep", "lost+found/keep", "u-3"} {
		if !exists(t, filepath.Join(d, keep)) {
			t.Errorf("%s removed", keep)
		}
	}
}

// Ensures a partition with a log in two dirs fails Open with ErrDuplicateLog.
func TestOpenRefusesDuplicateLog(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	create(t, m, tpOf("t", 0))
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if !exists(t, filepath.Join(dirs[0], "t-0")) {
		t.Fatal("log not in the first dir")
	}
	if err := os.MkdirAll(filepath.Join(dirs[1], "t-0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(config(dirs...)); !errors.Is(err, ErrDuplicateLog) {
		t.Fatalf("Open = %v, want ErrDuplicateLog", err)
	}
}

// Ensures Shutdown flushes before writing the checkpoints (so recovery points are the log ends), closes the manager for new logs, and is idempotent.
func TestShutdown(t *testing.T) {
	dirs := tempDirs(t, 1)
	cfg := config(dirs...)
	// Appends are not fsynced: only Shutdown's flush moves the recovery point.
	cfg.LogConfig.FlushPolicy = log.FlushOS
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	create(t, m, tpOf("t", 0))
	appendRecords(t, m, tpOf("t", 0), 2)
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if got := readFile(t, filepath.Join(dirs[0], RecoveryPointCheckpoint)); got != "0\n1\nt 0 2\n" {
		t.Fatalf("recovery points = %q", got)
	}
	if _, err := m.GetOrCreateLog(tpOf("t", 1), true); !errors.Is(err, log.ErrClosed) {
		t.Fatalf("GetOrCreateLog after Shutdown = %v, want log.ErrClosed", err)
	}
	if len(m.Logs()) != 0 {
		t.Fatal("logs still listed after Shutdown")
	}
}

// Ensures the log start offsets of log-start-offset-checkpoint are given to the logs loaded at start-up.
func TestOpenUsesLogStartCheckpoint(t *testing.T) {
	dirs := tempDirs(t, 1)
	m := open(t, dirs...)
	create(t, m, tpOf("t", 0), tpOf("t", 1))
	appendRecords(t, m, tpOf("t", 0), 5)
	appendRecords(t, m, tpOf("t", 1), 5)
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dirs[0], LogStartOffsetCheckpoint), "0\n1\nt 0 3\n")
	m = open(t, dirs...)
	for p, want := range map[tp.TopicPartition]int64{tpOf("t", 0): 3, tpOf("t", 1): 0} {
		l, ok := m.GetLog(p)
		if !ok {
			t.Fatalf("%s not loaded", p)
		}
		if got := l.LogStartOffset(); got != want {
			t.Errorf("%s log start = %d, want %d", p, got, want)
		}
	}
}

// TestHighWatermarksCappedAtRecoveryPoint ensures the HWs to checkpoint never pass the recovery point: a power loss may take the records above it (crashtest os seed 1: a HW checkpoint claiming 14 records of a log that came back with 10).
func TestHighWatermarksCappedAtRecoveryPoint(t *testing.T) {
	dir := tempDirs(t, 1)[0]
	cfg := config(dir)
	cfg.LogConfig.FlushPolicy = log.FlushOS
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	p := tpOf("t", 0)
	create(t, m, p)
	appendRecords(t, m, p, 5)
	l, _ := m.GetLog(p)
	l.UpdateHighWatermark(5)
	if got := m.HighWatermarks()[dir][p]; got != 0 {
		t.Fatalf("HW to checkpoint %d before any flush, want the recovery point 0", got)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := m.HighWatermarks()[dir][p]; got != 5 {
		t.Fatalf("HW to checkpoint %d after the flush, want 5", got)
	}
}
