package logmgr

import (
	"math/rand/v2"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// Regression tests for what the power-loss simulation (core/crashtest)
// found here: each builds the situation once and cuts the power many ways.

const powerCuts = 64

// crashConfig is a manager on a simulated disk that can lose power.
func crashConfig(fsys *crashfs.FS, dirs ...string) Config {
	return Config{Dirs: dirs, BrokerID: broker, LogConfig: log.Config{SegmentBytes: 300}, Logger: zerolog.Nop(), FS: fsys}
}

// afterPowerCuts runs setup on a fresh simulated disk for each seed, cuts
// the power and hands check the manager opened on what the disk kept.
func afterPowerCuts(t *testing.T, dirs []string, setup func(m *Manager), check func(seed uint64, m *Manager)) {
	t.Helper()
	for seed := range uint64(powerCuts) {
		fsys := crashfs.New()
		m, err := Open(crashConfig(fsys, dirs...))
		if err != nil {
			t.Fatal(err)
		}
		setup(m)
		after := fsys.CutPower(rand.New(rand.NewPCG(seed, 1)))
		recovered, err := Open(crashConfig(after, dirs...))
		if err != nil {
			t.Fatalf("seed %d: recovery failed: %v", seed, err)
		}
		check(seed, recovered)
		_ = recovered.Shutdown()
	}
}

// TestNewLogDirSurvivesPowerLoss ensures a log dir Open had to create survives a power loss with the durably created log in it (crashtest every-batch seed 1: MkdirAll without an fsync of the parent lost the whole dir).
func TestNewLogDirSurvivesPowerLoss(t *testing.T) {
	p := tpOf("t", 0)
	afterPowerCuts(t, []string{"/srv/kafka/d1"}, func(m *Manager) { create(t, m, p) }, func(seed uint64, m *Manager) {
		if _, ok := m.GetLog(p); !ok {
			t.Fatalf("seed %d: the log created with synced metadata is gone", seed)
		}
	})
}

// checkpointedLog opens a manager on fsys with p's log in dir holding five
// records, durable, and the dir's checkpoints written.
func checkpointedLog(t *testing.T, fsys *crashfs.FS, dir string, p tp.TopicPartition) *Manager {
	t.Helper()
	m, err := Open(crashConfig(fsys, dir))
	if err != nil {
		t.Fatal(err)
	}
	create(t, m, p)
	appendRecords(t, m, p, 5)
	if failed := m.CheckpointLogOffsets(); len(failed) > 0 {
		t.Fatal(failed)
	}
	return m
}

// openRecovered opens a manager on what a cut left, shut down when the test ends.
func openRecovered(t *testing.T, after *crashfs.FS, dir string) *Manager {
	t.Helper()
	m, err := Open(crashConfig(after, dir))
	if err != nil {
		t.Fatalf("recovery failed: %v", err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return m
}

// readRecoveryPoints reads dir's recovery-point checkpoint on fsys.
func readRecoveryPoints(t *testing.T, fsys *crashfs.FS, dir string) map[tp.TopicPartition]int64 {
	t.Helper()
	rps, err := checkpoint.ReadOffsets(fsys, filepath.Join(dir, RecoveryPointCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	return rps
}

// TestOpenRewritesLoweredRecoveryPoints ensures recovery that finds a log below its checkpointed recovery point rewrites the checkpoint before anything is appended (crashtest every-batch seed 135: a truncation cut before its checkpoint left the file claiming offsets that later, unflushed appends would have had trusted). A truncation now checkpoints before it cuts; the stale file is made by hand, as a power loss after an older version's truncation left it.
func TestOpenRewritesLoweredRecoveryPoints(t *testing.T) {
	dir, p := "/d1", tpOf("t", 0)
	fsys := crashfs.New()
	m := checkpointedLog(t, fsys, dir, p)
	l, _ := m.GetLog(p)
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	stale := map[tp.TopicPartition]int64{p: 5}
	must(t, checkpoint.WriteOffsets(fsys, filepath.Join(dir, RecoveryPointCheckpoint), stale, true))
	openRecovered(t, fsys, dir)
	if rp := readRecoveryPoints(t, fsys, dir)[p]; rp > 2 {
		t.Fatalf("recovery-point checkpoint still claims %d of a log recovered to 2", rp)
	}
}

// TestOpenRewritesCheckpointsOfMissingLogs ensures recovery drops the checkpoint entries of a log whose deletion was cut before it rewrote them, so a log created again under the name does not inherit them (crashtest every-batch seed 433).
func TestOpenRewritesCheckpointsOfMissingLogs(t *testing.T) {
	dir, p := "/d1", tpOf("t", 0)
	fsys := crashfs.New()
	m := checkpointedLog(t, fsys, dir, p)
	// The power goes as DeleteLog, its dir renamed away durably, rewrites the checkpoints.
	fsys.SetFault(func(op crashfs.Op) error {
		if op.Kind == crashfs.OpOpen && strings.HasPrefix(path.Base(op.Path), RecoveryPointCheckpoint) {
			fsys.CutPower(rand.New(rand.NewPCG(1, 1)))
		}
		return nil
	})
	if err := m.DeleteLog(p); err == nil {
		t.Fatal("DeleteLog outlived the power")
	}
	after := fsys.PowerCut()
	recovered := openRecovered(t, after, dir)
	if _, ok := recovered.GetLog(p); ok {
		t.Fatal("the deleted log is back")
	}
	if rp, ok := readRecoveryPoints(t, after, dir)[p]; ok {
		t.Fatalf("recovery-point checkpoint still holds %d for a log that is gone", rp)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
