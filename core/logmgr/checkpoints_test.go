package logmgr

import (
	"path/filepath"
	"testing"
)

// Ensures CheckpointLogOffsets writes each dir's recovery points and log start offsets in Kafka's format, with exactly that dir's logs.
func TestCheckpointLogOffsetsContents(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	create(t, m, tpOf("b", 1), tpOf("z", 0), tpOf("a", 10)) // b-1, a-10 in dirs[0]
	appendRecords(t, m, tpOf("a", 10), 3)
	appendRecords(t, m, tpOf("z", 0), 5)
	if err := m.FlushAll(); err != nil {
		t.Fatal(err)
	}
	if failed := m.CheckpointLogOffsets(); len(failed) != 0 {
		t.Fatal(failed)
	}
	want := map[string]string{
		filepath.Join(dirs[0], RecoveryPointCheckpoint):  "0\n2\na 10 3\nb 1 0\n",
		filepath.Join(dirs[0], LogStartOffsetCheckpoint): "0\n2\na 10 0\nb 1 0\n",
		filepath.Join(dirs[1], RecoveryPointCheckpoint):  "0\n1\nz 0 5\n",
		filepath.Join(dirs[1], LogStartOffsetCheckpoint): "0\n1\nz 0 0\n",
	}
	for path, w := range want {
		if got := readFile(t, path); got != w {
			t.Errorf("%s = %q, want %q", path, got, w)
		}
		if exists(t, path+".tmp") {
			t.Errorf("%s.tmp left behind", path)
		}
	}
}
