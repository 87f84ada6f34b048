package logmgr

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

const broker = 1

func tpOf(topic string, p int32) tp.TopicPartition {
	return tp.TopicPartition{Topic: topic, Partition: p}
}

// tempDirs returns n log dir paths that do not exist yet.
func tempDirs(t *testing.T, n int) []string {
	t.Helper()
	root := t.TempDir()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = filepath.Join(root, "d"+string(rune('a'+i)))
	}
	return dirs
}

func config(dirs ...string) Config {
	return Config{Dirs: dirs, BrokerID: broker, LogConfig: log.DefaultConfig()}
}

// open opens a manager that is shut down when the test ends.
func open(t *testing.T, dirs ...string) *Manager {
	t.Helper()
	m, err := Open(config(dirs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

func create(t *testing.T, m *Manager, ts ...tp.TopicPartition) {
	t.Helper()
	for _, p := range ts {
		if _, err := m.GetOrCreateLog(p, true); err != nil {
			t.Fatalf("GetOrCreateLog(%s): %v", p, err)
		}
	}
}

// appendRecords appends n one-record batches to the partition's log.
func appendRecords(t *testing.T, m *Manager, p tp.TopicPartition, n int) {
	t.Helper()
	l, ok := m.GetLog(p)
	if !ok {
		t.Fatalf("no log for %s", p)
	}
	for i := range n {
		b := record.Build([]record.Record{{Value: []byte{byte(i)}}}, 1)
		if _, err := l.AppendAsLeader(b, 0); err != nil {
			t.Fatalf("append to %s: %v", p, err)
		}
	}
}

func dirInfo(t *testing.T, m *Manager, path string) DirInfo {
	t.Helper()
	for _, d := range m.Dirs() {
		if d.Path == path {
			return d
		}
	}
	t.Fatalf("dir %s not configured", path)
	return DirInfo{}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// failure returns the failure reported on m.Failures, if any, without waiting.
func failure(m *Manager) (DirFailure, bool) {
	select {
	case f := <-m.Failures():
		return f, true
	default:
		return DirFailure{}, false
	}
}

// copiedToFuture gives p (created in m, five records) a future log in the
// other of dirs holding a copy of them all, as a move that caught up does,
// and returns both logs and the five batches.
func copiedToFuture(t *testing.T, m *Manager, dirs []string, p tp.TopicPartition) (cur, fut *log.Log, batches []byte) {
	t.Helper()
	create(t, m, p)
	appendRecords(t, m, p, 5)
	cur, _ = m.GetLog(p)
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
	return cur, fut, ri.Data
}
