package logmgr

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// deleteFixture opens a manager on fsys holding six logs to delete and two
// to keep, five durable records each, checkpointed.
func deleteFixture(t *testing.T, fsys *crashfs.FS, dir string) (m *Manager, gone, kept []tp.TopicPartition) {
	t.Helper()
	m, err := Open(crashConfig(fsys, dir))
	if err != nil {
		t.Fatal(err)
	}
	for i := range int32(6) {
		gone = append(gone, tpOf("gone", i))
	}
	kept = []tp.TopicPartition{tpOf("kept", 0), tpOf("kept", 1)}
	for _, p := range append(append([]tp.TopicPartition{}, gone...), kept...) {
		create(t, m, p)
		appendRecords(t, m, p, 5)
	}
	if failed := m.CheckpointLogOffsets(); len(failed) > 0 {
		t.Fatal(failed)
	}
	return m, gone, kept
}

// TestDeleteLogsBatches ensures DeleteLogs removes every named log, keeps
// the others with their records, forgets the deleted ones' checkpoint
// entries, and treats a partition without a log as nothing to do.
func TestDeleteLogsBatches(t *testing.T) {
	dir := "/d1"
	fsys := crashfs.New()
	m, gone, kept := deleteFixture(t, fsys, dir)
	defer m.Shutdown()
	if failed := m.DeleteLogs(append(gone, tpOf("never", 0))); len(failed) > 0 {
		t.Fatalf("DeleteLogs: %v", failed)
	}
	for _, p := range gone {
		if _, ok := m.GetLog(p); ok {
			t.Errorf("%s still served", p)
		}
	}
	rps := readRecoveryPoints(t, fsys, dir)
	for _, p := range gone {
		if _, ok := rps[p]; ok {
			t.Errorf("recovery-point checkpoint still names deleted %s", p)
		}
	}
	for _, p := range kept {
		l, ok := m.GetLog(p)
		if !ok || l.LogEndOffset() != 5 {
			t.Errorf("kept %s: %v", p, ok)
		}
		if _, ok := rps[p]; !ok {
			t.Errorf("recovery-point checkpoint lost kept %s", p)
		}
	}
}

// TestDeleteLogsSurvivesPowerLoss ensures a power cut anywhere in a batched
// deletion neither brings a deleted log back in part nor wedges the broker:
// after the restart each log to delete is gone or whole (a rename the cut
// undid; the controller, whose deletion stays pending until answered,
// deletes it again), gone for certain once DeleteLogs answered, deletable
// again, and the logs kept are intact.
func TestDeleteLogsSurvivesPowerLoss(t *testing.T) {
	dir := "/d1"
	// How many file operations the whole deletion takes, to cut at each.
	probe := crashfs.New()
	pm, gone, _ := deleteFixture(t, probe, dir)
	before := probe.Ops()
	if failed := pm.DeleteLogs(gone); len(failed) > 0 {
		t.Fatal(failed)
	}
	total := probe.Ops() - before
	_ = pm.Shutdown()

	for n := range total + 1 {
		t.Run(fmt.Sprint("cut after ", n), func(t *testing.T) {
			fsys := crashfs.New()
			m, gone, kept := deleteFixture(t, fsys, dir)
			fsys.CutPowerAfter(n, rand.New(rand.NewPCG(uint64(n), 7)))
			answered := len(m.DeleteLogs(gone)) == 0
			after := fsys.PowerCut()
			if after == nil {
				after = fsys.CutPower(rand.New(rand.NewPCG(uint64(n), 8)))
			}
			r, err := Open(crashConfig(after, dir))
			if err != nil {
				t.Fatalf("restart after the cut: %v", err)
			}
			defer r.Shutdown()
			for _, p := range kept {
				if l, ok := r.GetLog(p); !ok || l.LogEndOffset() != 5 {
					t.Fatalf("kept %s lost (present %v)", p, ok)
				}
			}
			for _, p := range gone {
				l, ok := r.GetLog(p)
				switch {
				case ok && answered:
					t.Fatalf("%s is back after DeleteLogs answered", p)
				case ok && l.LogEndOffset() != 5:
					t.Fatalf("%s came back in part: log end %d of 5", p, l.LogEndOffset())
				}
			}
			if failed := r.DeleteLogs(gone); len(failed) > 0 {
				t.Fatalf("deleting again after the restart: %v", failed)
			}
			entries, err := after.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), "gone-") && !strings.HasSuffix(e.Name(), DeleteDirSuffix) {
					t.Fatalf("%s still in the log dir", e.Name())
				}
			}
		})
	}
}
