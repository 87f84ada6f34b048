package logmgr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ensures a future log created by GetOrCreateFutureLog is loaded at Open as
// the future log (not as a second current log), with its data and its dir.
func TestFutureLogLoadsAtOpen(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	p := tpOf("t", 0)
	create(t, m, p)
	appendRecords(t, m, p, 5)
	cur, _ := m.GetLog(p)
	curDir, _ := m.DirOf(p)
	dest := dirs[0]
	if curDir == dest {
		dest = dirs[1]
	}
	if _, err := m.GetOrCreateFutureLog(p, "/not/a/log/dir"); !errors.Is(err, ErrDirNotFound) {
		t.Fatalf("unknown dir: %v", err)
	}
	if _, err := m.GetOrCreateFutureLog(p, curDir); err == nil {
		t.Fatal("future log created in the current log's dir")
	}
	fut, err := m.GetOrCreateFutureLog(p, dest)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(fut.Dir(), FutureDirSuffix) || filepath.Dir(fut.Dir()) != dest {
		t.Fatalf("future log dir %s", fut.Dir())
	}
	ri, err := cur.Read(0, 1<<20, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fut.AppendAsFollower(ri.Data); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}

	m = open(t, dirs...)
	if d, ok := m.DirOf(p); !ok || d != curDir {
		t.Fatalf("current log in %q (%v), want %s", d, ok, curDir)
	}
	if l, _ := m.GetLog(p); l.LogEndOffset() != 5 {
		t.Fatalf("current LEO %d", l.LogEndOffset())
	}
	fut, ok := m.FutureLog(p)
	if !ok || fut.LogEndOffset() != 3 {
		t.Fatalf("future log %v after reopen", ok)
	}
	if d, _ := m.FutureDirOf(p); d != dest {
		t.Fatalf("future dir %s, want %s", d, dest)
	}
	if byDir := m.LogsByDir(); byDir[dest][p] != fut {
		t.Fatal("future log not listed in its dir (HW checkpoint)")
	}
}

// Ensures ReplaceCurrentWithFutureLog moves the partition: the log is in the
// new dir with its data and the HW given, the old dir is gone, and the next
// Open finds it there.
func TestReplaceCurrentWithFutureLog(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	p := tpOf("t", 0)
	create(t, m, p)
	appendRecords(t, m, p, 4)
	cur, _ := m.GetLog(p)
	curDir, _ := m.DirOf(p)
	dest := dirs[0]
	if curDir == dest {
		dest = dirs[1]
	}
	fut, err := m.GetOrCreateFutureLog(p, dest)
	if err != nil {
		t.Fatal(err)
	}
	ri, _ := cur.Read(0, 1<<20, 4)
	if _, err := fut.AppendAsFollower(ri.Data); err != nil {
		t.Fatal(err)
	}
	l, err := m.ReplaceCurrentWithFutureLog(p, 3)
	if err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 4 || l.HighWatermark() != 3 || l.Dir() != filepath.Join(dest, p.String()) {
		t.Fatalf("moved log: LEO %d HW %d dir %s", l.LogEndOffset(), l.HighWatermark(), l.Dir())
	}
	if d, _ := m.DirOf(p); d != dest {
		t.Fatalf("DirOf %s", d)
	}
	if _, ok := m.FutureLog(p); ok {
		t.Fatal("future log still listed")
	}
	if err := m.Shutdown(); err != nil { // waits for the background removal
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(curDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), p.String()) {
			t.Fatalf("%s left in the old dir", e.Name())
		}
	}
	m = open(t, dirs...)
	if d, _ := m.DirOf(p); d != dest {
		t.Fatalf("after reopen DirOf %s", d)
	}
}

// Ensures a crash mid-swap (current dir already renamed to -delete, future
// dir not yet renamed) is completed at Open: the future log becomes the
// current log, in its dir, with every record, and the old copy is removed.
func TestOpenCompletesInterruptedSwap(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	p := tpOf("t", 0)
	create(t, m, p)
	appendRecords(t, m, p, 6)
	cur, _ := m.GetLog(p)
	curDir, _ := m.DirOf(p)
	dest := dirs[0]
	if curDir == dest {
		dest = dirs[1]
	}
	fut, err := m.GetOrCreateFutureLog(p, dest)
	if err != nil {
		t.Fatal(err)
	}
	ri, _ := cur.Read(0, 1<<20, 6)
	if _, err := fut.AppendAsFollower(ri.Data); err != nil {
		t.Fatal(err)
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// The crash: the first rename of the swap happened, the second did not.
	if err := os.Rename(filepath.Join(curDir, p.String()), filepath.Join(curDir, p.String()+".00ff-delete")); err != nil {
		t.Fatal(err)
	}

	m = open(t, dirs...)
	l, ok := m.GetLog(p)
	if !ok || l.LogEndOffset() != 6 || l.Dir() != filepath.Join(dest, p.String()) {
		t.Fatalf("promoted log: %v", ok)
	}
	if _, ok := m.FutureLog(p); ok {
		t.Fatal("future log still listed after promotion")
	}
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), p.String()) && e.Name() != p.String() {
				t.Fatalf("%s left in %s", e.Name(), d)
			}
		}
	}
}
