package logmgr

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// twoDirsWithLogs makes two dirs each holding one log with data, and returns
// the dirs and the partitions (parts[i] in dirs[i]).
func twoDirsWithLogs(t *testing.T) ([]string, []tp.TopicPartition) {
	t.Helper()
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	parts := []tp.TopicPartition{tpOf("a", 0), tpOf("b", 0)}
	create(t, m, parts...)
	for i, p := range parts {
		if dir, _ := m.DirOf(p); dir != dirs[i] {
			t.Fatalf("%s in %s, want %s", p, dir, dirs[i])
		}
		appendRecords(t, m, p, 2)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	return dirs, parts
}

// Ensures a malformed recovery-point or log-start checkpoint takes only its dir offline, with its logs unloaded, while the other dir stays online.
func TestMalformedOffsetCheckpointTakesOnlyItsDirOffline(t *testing.T) {
	for _, file := range []string{RecoveryPointCheckpoint, LogStartOffsetCheckpoint} {
		t.Run(file, func(t *testing.T) {
			dirs, parts := twoDirsWithLogs(t)
			writeFile(t, filepath.Join(dirs[0], file), "0\n1\na 0\n")
			m := open(t, dirs...)
			bad, good := dirInfo(t, m, dirs[0]), dirInfo(t, m, dirs[1])
			if bad.Online || !errors.Is(bad.Err, checkpoint.ErrMalformed) || bad.Partitions != 0 {
				t.Fatalf("bad dir = %+v, want offline with ErrMalformed", bad)
			}
			if _, ok := m.GetLog(parts[0]); ok {
				t.Fatal("a log of the offline dir was loaded")
			}
			if !good.Online || good.Partitions != 1 {
				t.Fatalf("good dir = %+v, want online with 1 partition", good)
			}
			l, ok := m.GetLog(parts[1])
			if !ok || l.LogEndOffset() != 2 {
				t.Fatal("the other dir's log is not loaded with its data")
			}
			// New logs go to the online dir only.
			create(t, m, tpOf("new", 0))
			if dir, _ := m.DirOf(tpOf("new", 0)); dir != dirs[1] {
				t.Fatalf("new log in %s", dir)
			}
		})
	}
}

// Ensures a partition log that cannot be opened takes its dir offline, and the dir's other logs are not served.
func TestLogOpenFailureTakesDirOffline(t *testing.T) {
	dirs, parts := twoDirsWithLogs(t)
	// A segment that is a directory cannot be read.
	seg := filepath.Join(dirs[0], "z-0", "00000000000000000000.log")
	if err := os.MkdirAll(filepath.Join(seg, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	m := open(t, dirs...)
	bad := dirInfo(t, m, dirs[0])
	if bad.Online || bad.Err == nil {
		t.Fatalf("dir = %+v, want offline", bad)
	}
	if _, ok := m.GetLog(parts[0]); ok {
		t.Fatal("a log of the offline dir is served")
	}
	if _, ok := m.GetLog(parts[1]); !ok || !dirInfo(t, m, dirs[1]).Online {
		t.Fatal("the other dir was affected")
	}
}

// Ensures MarkDirOffline returns the dir's partitions, GetLog no longer finds them, the cause is recorded, and a second call does nothing.
func TestMarkDirOffline(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	parts := []tp.TopicPartition{tpOf("b", 1), tpOf("x", 0), tpOf("a", 5), tpOf("y", 0)}
	create(t, m, parts...) // b-1, a-5 in dirs[0]; x-0, y-0 in dirs[1]
	cause := errors.New("disk on fire")
	lost := m.MarkDirOffline(dirs[0], cause)
	if want := []tp.TopicPartition{tpOf("a", 5), tpOf("b", 1)}; !reflect.DeepEqual(lost, want) {
		t.Fatalf("MarkDirOffline = %v, want %v", lost, want)
	}
	for _, p := range lost {
		if _, ok := m.GetLog(p); ok {
			t.Fatalf("GetLog still finds %s", p)
		}
		if _, ok := m.DirOf(p); ok {
			t.Fatalf("DirOf still finds %s", p)
		}
	}
	if d := dirInfo(t, m, dirs[0]); d.Online || d.Err != cause || d.Partitions != 0 {
		t.Fatalf("dir = %+v", d)
	}
	if got := m.MarkDirOffline(dirs[0], errors.New("again")); got != nil {
		t.Fatalf("second MarkDirOffline = %v", got)
	}
	if d := dirInfo(t, m, dirs[0]); d.Err != cause {
		t.Fatalf("cause replaced by %v", d.Err)
	}
	if len(m.Logs()) != 2 {
		t.Fatalf("Logs = %v, want the two of the other dir", m.Logs())
	}
	if got := m.MarkDirOffline("/not/a/log/dir", cause); got != nil {
		t.Fatalf("unknown dir = %v", got)
	}
	// Nothing is written to the offline dir any more.
	if failed := m.CheckpointLogOffsets(); len(failed) != 0 {
		t.Fatal(failed)
	}
	if f, ok := failure(m); ok {
		t.Fatalf("unexpected failure %v", f)
	}
	if err := m.SyncDirs(); err != nil {
		t.Fatal(err)
	}
}

// Ensures a storage failure creating a log is returned wrapping log.ErrStorage and reported once on Failures.
func TestCreateFailureIsReported(t *testing.T) {
	dirs := tempDirs(t, 1)
	m := open(t, dirs...)
	// A file where the partition dir should be.
	writeFile(t, filepath.Join(dirs[0], "t-0"), "")
	writeFile(t, filepath.Join(dirs[0], "t-1"), "")
	_, err := m.GetOrCreateLog(tpOf("t", 0), true)
	if !errors.Is(err, log.ErrStorage) {
		t.Fatalf("GetOrCreateLog = %v, want log.ErrStorage", err)
	}
	f, ok := failure(m)
	if !ok || f.Dir != dirs[0] || !errors.Is(f.Err, log.ErrStorage) {
		t.Fatalf("failure = %+v, %v", f, ok)
	}
	if _, err := m.GetOrCreateLog(tpOf("t", 1), true); err == nil {
		t.Fatal("second create succeeded")
	}
	if f, ok := failure(m); ok {
		t.Fatalf("dir reported twice: %+v", f)
	}
	// Reporting does not take the dir offline: the receiver does.
	if !dirInfo(t, m, dirs[0]).Online {
		t.Fatal("dir offline")
	}
}

// Ensures a failed checkpoint write is returned for its dir and reported on Failures.
func TestCheckpointFailureIsReported(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	// A dir in place of the tmp file makes the write fail.
	if err := os.MkdirAll(filepath.Join(dirs[1], RecoveryPointCheckpoint+".tmp", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	failed := m.CheckpointLogOffsets()
	if len(failed) != 1 || !errors.Is(failed[dirs[1]], log.ErrStorage) {
		t.Fatalf("CheckpointLogOffsets = %v, want a storage error for %s", failed, dirs[1])
	}
	if f, ok := failure(m); !ok || f.Dir != dirs[1] {
		t.Fatalf("failure = %+v, %v", f, ok)
	}
	if got := readFile(t, filepath.Join(dirs[0], RecoveryPointCheckpoint)); got != "0\n0\n" {
		t.Fatalf("the other dir's checkpoint = %q", got)
	}
}

// Ensures SyncDirs syncs only online dirs and reports a dir that cannot be synced.
func TestSyncDirs(t *testing.T) {
	dirs := tempDirs(t, 3)
	m := open(t, dirs...)
	create(t, m, tpOf("t", 0))
	m.MarkDirOffline(dirs[1], errors.New("failed"))
	if err := os.RemoveAll(dirs[1]); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDirs(); err != nil {
		t.Fatalf("SyncDirs = %v (an offline dir must be skipped)", err)
	}
	if err := os.RemoveAll(dirs[2]); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDirs(); !errors.Is(err, log.ErrStorage) {
		t.Fatalf("SyncDirs = %v, want a storage error", err)
	}
	if f, ok := failure(m); !ok || f.Dir != dirs[2] {
		t.Fatalf("failure = %+v, %v", f, ok)
	}
}
