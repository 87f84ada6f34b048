package logmgr

import (
	"path/filepath"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// Ensures every way a log leaves a dir (deleted, set aside, a future log
// deleted, a current log replaced by its future log) rewrites the dir's
// three checkpoints without the partition before it returns: the files are
// keyed by partition name, and a log created there again under the name
// must not inherit the removed log's HW, recovery point or log start after
// a crash. The dir's other logs keep their entries.
func TestLogRemovalDropsItsCheckpointEntries(t *testing.T) {
	gone, other := tpOf("gone", 0), tpOf("other", 0)
	for _, tc := range []struct {
		name string
		// future: the removed log is a future log of gone in dirs[1].
		future bool
		remove func(m *Manager) error
	}{
		{"delete", false, func(m *Manager) error { return m.DeleteLog(gone) }},
		{"set aside", false, func(m *Manager) error { _, err := m.SetAsideLog(gone); return err }},
		{"delete future", true, func(m *Manager) error { return m.DeleteFutureLog(gone) }},
		{"replace with future", false, func(m *Manager) error {
			fut, err := m.GetOrCreateFutureLog(gone, m.cfg.Dirs[1])
			if err != nil {
				return err
			}
			appendTo(t, fut, 3)
			_, err = m.ReplaceCurrentWithFutureLog(gone, 3)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dirs := tempDirs(t, 2)
			m := open(t, dirs...)
			create(t, m, gone, other) // gone in dirs[0], other in dirs[1]
			if d, _ := m.DirOf(gone); d != dirs[0] {
				t.Fatalf("gone is in %s, want %s", d, dirs[0])
			}
			from := dirs[0]
			l, _ := m.GetLog(gone)
			if tc.future {
				fut, err := m.GetOrCreateFutureLog(gone, dirs[1])
				if err != nil {
					t.Fatal(err)
				}
				l, from = fut, dirs[1]
			}
			appendTo(t, l, 3)
			appendRecords(t, m, other, 2)
			if err := m.FlushAll(); err != nil {
				t.Fatal(err)
			}
			for _, x := range []tp.TopicPartition{gone, other} {
				if l, ok := m.GetLog(x); ok {
					l.UpdateHighWatermark(l.LogEndOffset())
				}
			}
			l.UpdateHighWatermark(l.LogEndOffset())
			if failed := m.CheckpointLogOffsets(); len(failed) != 0 {
				t.Fatal(failed)
			}
			for _, c := range m.CheckpointHighWatermarks(dirs) {
				if c.Err != nil {
					t.Fatal(c.Err)
				}
			}
			for _, name := range checkpointNames {
				if _, ok := readOffsets(t, filepath.Join(from, name))[gone]; !ok {
					t.Fatalf("%s of %s does not name %s before the removal: the test shows nothing", name, from, gone)
				}
			}

			if err := tc.remove(m); err != nil {
				t.Fatal(err)
			}
			for _, name := range checkpointNames {
				got := readOffsets(t, filepath.Join(from, name))
				if v, ok := got[gone]; ok {
					t.Errorf("%s of %s still names the removed log of %s (%d)", name, from, gone, v)
				}
				if _, ok := readOffsets(t, filepath.Join(dirs[1], name))[other]; !ok {
					t.Errorf("%s of %s lost the entry of %s", name, dirs[1], other)
				}
			}
		})
	}
}

var checkpointNames = []string{ReplicationOffsetCheckpoint, RecoveryPointCheckpoint, LogStartOffsetCheckpoint}

func readOffsets(t *testing.T, path string) map[tp.TopicPartition]int64 {
	t.Helper()
	m, err := checkpoint.ReadOffsets(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// appendTo appends n one-record batches to l.
func appendTo(t *testing.T, l *log.Log, n int) {
	t.Helper()
	for i := range n {
		if _, err := l.AppendAsLeader(record.Build([]record.Record{{Value: []byte{byte(i)}}}, 1), 0); err != nil {
			t.Fatal(err)
		}
	}
}
