package logmgr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicad/replicad/core/vfs"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// The previous broker epoch tells a life that lost nothing (a clean
// shutdown, or a crash of the process in the same boot) from one that may
// have (a crash in another boot, a new or missing dir, a dir that failed).
func TestPreviousBrokerEpoch(t *testing.T) {
	start := func(t *testing.T, boot string, dirs ...string) *Manager {
		t.Helper()
		cfg := config(dirs...)
		cfg.BootID = boot
		m, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Run("new dirs", func(t *testing.T) {
		dirs := tempDirs(t, 2)
		m := start(t, "boot-a", dirs...)
		defer m.Shutdown()
		if got := m.PreviousBrokerEpoch(); got != -1 {
			t.Fatalf("previous broker epoch of new dirs %d, want -1", got)
		}
	})
	t.Run("clean shutdown, then another boot", func(t *testing.T) {
		dirs := tempDirs(t, 2)
		m := start(t, "boot-a", dirs...)
		if err := m.RecordBrokerEpoch(7); err != nil {
			t.Fatal(err)
		}
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
		m = start(t, "boot-b", dirs...)
		defer m.Shutdown()
		if got := m.PreviousBrokerEpoch(); got != 7 {
			t.Fatalf("previous broker epoch after a clean shutdown %d, want 7", got)
		}
	})
	crash := func(t *testing.T, dirs []string, boot string) *Manager {
		t.Helper()
		m := start(t, "boot-a", dirs...)
		if err := m.RecordBrokerEpoch(9); err != nil {
			t.Fatal(err)
		}
		// A crash: nothing more is written (the files stay as registered).
		return start(t, boot, dirs...)
	}
	t.Run("process crash, same boot", func(t *testing.T) {
		m := crash(t, tempDirs(t, 2), "boot-a")
		defer m.Shutdown()
		if got := m.PreviousBrokerEpoch(); got != 9 {
			t.Fatalf("previous broker epoch after a crash in the same boot %d, want 9 (the page cache kept everything)", got)
		}
	})
	t.Run("crash with the machine", func(t *testing.T) {
		m := crash(t, tempDirs(t, 2), "boot-b")
		defer m.Shutdown()
		if got := m.PreviousBrokerEpoch(); got != -1 {
			t.Fatalf("previous broker epoch after a crash in another boot %d, want -1", got)
		}
	})
	t.Run("a dir wiped", func(t *testing.T) {
		dirs := tempDirs(t, 2)
		m := start(t, "boot-a", dirs...)
		if err := m.RecordBrokerEpoch(7); err != nil {
			t.Fatal(err)
		}
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(dirs[1]); err != nil {
			t.Fatal(err)
		}
		m = start(t, "boot-a", dirs...)
		defer m.Shutdown()
		if got := m.PreviousBrokerEpoch(); got != -1 {
			t.Fatalf("previous broker epoch with a wiped dir %d, want -1", got)
		}
	})
	t.Run("meta.properties lost, broker-state kept", func(t *testing.T) {
		// A dir that lost its meta.properties is taken for a new dir: what
		// else it lost is unknown, even when its broker-state survived.
		dirs := tempDirs(t, 2)
		m := start(t, "boot-a", dirs...)
		if err := m.RecordBrokerEpoch(7); err != nil {
			t.Fatal(err)
		}
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dirs[1], MetaPropertiesFile)); err != nil {
			t.Fatal(err)
		}
		m = start(t, "boot-a", dirs...)
		defer m.Shutdown()
		if got := m.PreviousBrokerEpoch(); got != -1 {
			t.Fatalf("previous broker epoch with a dir missing meta.properties %d, want -1", got)
		}
	})
	t.Run("a dir failed in the life", func(t *testing.T) {
		dirs := tempDirs(t, 2)
		m := start(t, "boot-a", dirs...)
		if err := m.RecordBrokerEpoch(7); err != nil {
			t.Fatal(err)
		}
		m.MarkDirOffline(dirs[1], errors.New("disk gone"))
		_ = m.Shutdown()
		m = start(t, "boot-a", dirs...)
		defer m.Shutdown()
		if got := m.PreviousBrokerEpoch(); got != -1 {
			t.Fatalf("previous broker epoch after a dir failed %d, want -1", got)
		}
		if st, err := readBrokerState(vfs.OS, dirs[0]); err != nil || st.epoch != -1 {
			t.Fatalf("the surviving dir records %+v (%v), want epoch -1", st, err)
		}
	})
}

// A registration's broker-state write that read the life as sound must not
// land after the write that marks it lossy (a dir failed meanwhile): the
// next start would take a life that lost a dir for one that lost nothing.
// The registration's write is held at its first file operation; the
// failure's write must wait for it.
func TestLossyLifeIsNotOverwrittenByARacingRegistration(t *testing.T) {
	fsys := crashfs.New()
	dirs := []string{"/d/a", "/d/b"}
	cfg := crashConfig(fsys, dirs...)
	cfg.BootID = "boot"
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	held, release, lossyWrite := make(chan struct{}), make(chan struct{}), make(chan struct{}, 1)
	var calls atomic.Int32
	fsys.SetFault(func(op crashfs.Op) error {
		if op.Kind == crashfs.OpOpen && strings.HasSuffix(op.Path, BrokerStateFile+".tmp") {
			switch calls.Add(1) {
			case 1:
				close(held)
				<-release
			default:
				select {
				case lossyWrite <- struct{}{}:
				default:
				}
			}
		}
		return nil
	})
	registered := make(chan error, 1)
	go func() { registered <- m.RecordBrokerEpoch(7) }()
	<-held
	lost := make(chan struct{})
	go func() { m.MarkDirOffline(dirs[1], errors.New("disk gone")); close(lost) }()
	select {
	case <-lossyWrite:
		t.Error("the lossy mark was written while the registration's write was in flight")
	case <-time.After(200 * time.Millisecond): // it waits, as it must
	}
	close(release)
	if err := <-registered; err != nil {
		t.Fatal(err)
	}
	<-lost
	fsys.SetFault(nil)
	st, err := readBrokerState(fsys, dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	if st.epoch != -1 {
		t.Fatalf("broker-state epoch %d after a dir failed in this life, want -1", st.epoch)
	}
}
