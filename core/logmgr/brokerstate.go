package logmgr

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/vfs"
)

// BrokerStateFile is each log dir's record of the broker's current life:
// the broker epoch it registered with, the boot id of the machine, and
// whether it shut down cleanly. Kafka's clean shutdown file
// (.kafka_cleanshutdown, KIP-966) says only the last; the boot id lets a
// crash of the process alone, which keeps the page cache and so everything
// written, count as a life that lost nothing.
const BrokerStateFile = "broker-state"

// brokerStateVersion is the format of BrokerStateFile.
const brokerStateVersion = "0"

// brokerState is one log dir's BrokerStateFile.
type brokerState struct {
	epoch  int64
	bootID string
	clean  bool
}

// PreviousBrokerEpoch is the broker epoch of the broker's previous life
// when every log dir says that life lost nothing, -1 otherwise. The broker
// sends it when it registers (KIP-966's PreviousBrokerEpoch): the
// controller takes a broker that may have lost records it acknowledged out
// of every set of eligible leaders.
//
// A life lost nothing when it ended in a clean shutdown (the logs flushed
// and closed), or in a crash of the process on a machine that kept running
// (the same boot id: the kernel still held, and wrote back, everything the
// process had written). It may have lost its unflushed tail when the
// machine went down with it (a power loss, a kernel crash), and everything
// when a log dir was new (a wiped or replaced disk), offline at start-up,
// or missing its record; dirs that disagree count as lost too.
func (m *Manager) PreviousBrokerEpoch() int64 { return m.previousBrokerEpoch }

// previousLife reads every dir's BrokerStateFile at start-up (see
// PreviousBrokerEpoch). fresh says which dirs had no meta.properties yet.
func previousLife(fsys vfs.FS, dirs []*logDir, fresh map[*logDir]bool, bootID string) int64 {
	epoch := int64(-1)
	for i, d := range dirs {
		if !d.online || fresh[d] {
			return -1
		}
		st, err := readBrokerState(fsys, d.path)
		if err != nil {
			return -1
		}
		if !st.clean && (bootID == "" || st.bootID != bootID) {
			return -1
		}
		if i > 0 && st.epoch != epoch {
			return -1
		}
		epoch = st.epoch
	}
	return epoch
}

// RecordBrokerEpoch writes, durably, to every online dir that the broker's
// current life registered with epoch and has not shut down cleanly; the
// broker calls it at each registration. Until it is written, a crash leaves
// the epoch of the life before in the file, which the controller then sees
// does not match the broker's last registration: the crash counts as
// unclean, which is the safe side. A dir whose write fails is reported on
// Failures.
func (m *Manager) RecordBrokerEpoch(epoch int64) error {
	m.mu.Lock()
	m.brokerEpoch = epoch
	m.mu.Unlock()
	return m.writeBrokerState(brokerState{epoch: epoch, bootID: m.cfg.BootID, clean: false})
}

// markLifeLossy records in the online dirs that this life lost a dir.
func (m *Manager) markLifeLossy() {
	m.mu.Lock()
	m.lossy = true
	m.mu.Unlock()
	_ = m.writeBrokerState(brokerState{epoch: -1, bootID: m.cfg.BootID, clean: false})
}

// writeBrokerState writes st to every online dir, or epoch -1 once the
// life is lossy. brokerStateMu orders the writers: a write that read the
// life as not lossy must not land after the one that marks it lossy.
func (m *Manager) writeBrokerState(st brokerState) error {
	m.brokerStateMu.Lock()
	defer m.brokerStateMu.Unlock()
	m.mu.RLock()
	if m.lossy {
		st.epoch, st.clean = -1, false
	}
	m.mu.RUnlock()
	dirs, _ := m.snapshot()
	var errs []error
	for _, d := range dirs {
		if err := writeBrokerStateFile(m.fsys, d.path, st); err != nil {
			err = ioError("write "+BrokerStateFile, err)
			m.reportFailure(d, err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func writeBrokerStateFile(fsys vfs.FS, dir string, st brokerState) error {
	data := "version=" + brokerStateVersion + "\nbroker.epoch=" + strconv.FormatInt(st.epoch, 10) +
		"\nboot.id=" + st.bootID + "\nclean.shutdown=" + strconv.FormatBool(st.clean) + "\n"
	return checkpoint.WriteFileAtomic(fsys, filepath.Join(dir, BrokerStateFile), []byte(data), true)
}

// readBrokerState reads dir's BrokerStateFile; a missing or malformed file
// is an error (the life it would describe is unknown).
func readBrokerState(fsys vfs.FS, dir string) (brokerState, error) {
	path := filepath.Join(dir, BrokerStateFile)
	data, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return brokerState{}, fmt.Errorf("%s: missing", path)
	}
	if err != nil {
		return brokerState{}, err
	}
	props, err := parseProperties(data)
	if err != nil {
		return brokerState{}, fmt.Errorf("%s: %w", path, err)
	}
	if v := props["version"]; v != brokerStateVersion {
		return brokerState{}, fmt.Errorf("%s: version %q, want %s", path, v, brokerStateVersion)
	}
	epoch, err := strconv.ParseInt(props["broker.epoch"], 10, 64)
	if err != nil {
		return brokerState{}, fmt.Errorf("%s: broker.epoch: %w", path, err)
	}
	clean, err := strconv.ParseBool(props["clean.shutdown"])
	if err != nil {
		return brokerState{}, fmt.Errorf("%s: clean.shutdown: %w", path, err)
	}
	return brokerState{epoch: epoch, bootID: strings.TrimSpace(props["boot.id"]), clean: clean}, nil
}
