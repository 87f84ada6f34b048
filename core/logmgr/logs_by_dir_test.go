package logmgr

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// Ensures LogsByDir groups every online log under its own dir and leaves out offline dirs.
func TestLogsByDir(t *testing.T) {
	dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
	m, err := Open(Config{Dirs: dirs, BrokerID: 1, LogConfig: log.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	for p := int32(0); p < 3; p++ {
		if _, err := m.GetOrCreateLog(tp.TopicPartition{Topic: "t", Partition: p}, true); err != nil {
			t.Fatal(err)
		}
	}
	got := m.LogsByDir()
	if len(got[dirs[0]]) != 2 || len(got[dirs[1]]) != 1 {
		t.Fatalf("by dir: %d and %d logs, want 2 and 1", len(got[dirs[0]]), len(got[dirs[1]]))
	}
	m.MarkDirOffline(dirs[1], errors.New("disk gone"))
	if got := m.LogsByDir(); len(got) != 1 || len(got[dirs[0]]) != 2 {
		t.Fatalf("after offline: %v", got)
	}
}

// Ensures a truncation writes the log's lowered recovery point to its dir's
// recovery-point-offset-checkpoint itself.
func TestTruncationWritesItsLoweredRecoveryPoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a")
	m, err := Open(Config{Dirs: []string{dir}, BrokerID: 1, LogConfig: log.DefaultConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	part := tp.TopicPartition{Topic: "t", Partition: 0}
	l, err := m.GetOrCreateLog(part, true)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := l.AppendAsLeader(record.Build([]record.Record{{Value: []byte("v")}}, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	m.CheckpointLogOffsets()
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.ReadOffsets(vfs.OS, filepath.Join(dir, RecoveryPointCheckpoint))
	if err != nil || got[part] != 1 {
		t.Fatalf("recovery points %v %v, want t-0 at 1", got, err)
	}
}
