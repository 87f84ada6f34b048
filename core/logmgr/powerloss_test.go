package logmgr

import (
	"math/rand/v2"
	"testing"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/log"
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
