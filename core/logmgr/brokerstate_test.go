package logmgr

import (
	"errors"
	"os"
	"testing"

	"github.com/replicad/replicad/core/vfs"
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
