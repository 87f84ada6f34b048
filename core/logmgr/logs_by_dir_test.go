package logmgr

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
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
