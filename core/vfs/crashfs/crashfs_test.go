package crashfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/replicad/replicad/core/vfs"
)

const cuts = 200 // cuts per rule: enough for every outcome of a few pages

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, f vfs.FS, name string, data []byte, syncData bool) vfs.File {
	t.Helper()
	h, err := f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	must(t, err)
	if _, err := h.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	if syncData {
		must(t, h.Sync())
	}
	return h
}

// contents returns name's content after the cut, or nil when it is missing.
func contents(t *testing.T, f *FS, name string) []byte {
	t.Helper()
	data, err := f.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	must(t, err)
	return data
}

// outcomes cuts the file system that setup builds in many ways and returns
// what name held after each cut ("<missing>" when absent).
func outcomes(t *testing.T, setup func(f *FS), name string) map[string]int {
	t.Helper()
	seen := make(map[string]int)
	for seed := range uint64(cuts) {
		f := New()
		setup(f)
		after := f.CutPower(rng(seed))
		if data := contents(t, after, name); data == nil {
			seen["<missing>"]++
		} else {
			seen[string(data)]++
		}
	}
	return seen
}

func pattern(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// TestUnsyncedWriteMayBeLost ensures a write without fsync is lost in some cuts and kept in others, and nothing else.
func TestUnsyncedWriteMayBeLost(t *testing.T) {
	seen := outcomes(t, func(f *FS) {
		h := create(t, f, "/f", nil, true)
		must(t, f.SyncDir("/"))
		if _, err := h.WriteAt([]byte("hello"), 0); err != nil {
			t.Fatal(err)
		}
	}, "/f")
	// Size durable (0) or current (5); the page old (zeros) or new.
	allowed := map[string]bool{"": true, "hello": true, "\x00\x00\x00\x00\x00": true}
	for s := range seen {
		if !allowed[s] {
			t.Fatalf("cut left %q, outside the allowed outcomes", s)
		}
	}
	if seen[""] == 0 || seen["hello"] == 0 || seen["\x00\x00\x00\x00\x00"] == 0 {
		t.Fatalf("outcomes %v: want the write lost, kept, and the size alone kept", seen)
	}
}

// TestSyncedDataSurvives ensures data fsynced with its directory entry survives every cut.
func TestSyncedDataSurvives(t *testing.T) {
	seen := outcomes(t, func(f *FS) {
		create(t, f, "/f", []byte("durable"), true)
		must(t, f.SyncDir("/"))
	}, "/f")
	if len(seen) != 1 || seen["durable"] != cuts {
		t.Fatalf("outcomes %v, want always the synced data", seen)
	}
}

// TestTornPages ensures an unsynced overwrite of two pages comes back page by page old, new or torn at sector boundaries.
func TestTornPages(t *testing.T) {
	old, cur := pattern('o', 2*PageSize), pattern('n', 2*PageSize)
	seen := outcomes(t, func(f *FS) {
		h := create(t, f, "/f", old, true)
		must(t, f.SyncDir("/"))
		if _, err := h.WriteAt(cur, 0); err != nil {
			t.Fatal(err)
		}
	}, "/f")
	torn := 0
	for s := range seen {
		if len(s) != 2*PageSize {
			t.Fatalf("size %d, want %d", len(s), 2*PageSize)
		}
		for sec := 0; sec < len(s); sec += SectorSize {
			part := s[sec : sec+SectorSize]
			if part != string(old[:SectorSize]) && part != string(cur[:SectorSize]) {
				t.Fatalf("sector at %d is neither old nor new", sec)
			}
		}
		for pg := 0; pg < 2; pg++ {
			p := s[pg*PageSize : (pg+1)*PageSize]
			if p != string(old[:PageSize]) && p != string(cur[:PageSize]) {
				torn++
			}
		}
	}
	if seen[string(old)] == 0 || seen[string(cur)] == 0 || torn == 0 {
		t.Fatalf("%d outcomes, %d torn pages: want all old, all new and torn ones", len(seen), torn)
	}
}

// TestExtendedSizeReadsZeros ensures a size made durable without its data reads as zeros.
func TestExtendedSizeReadsZeros(t *testing.T) {
	seen := outcomes(t, func(f *FS) {
		h := create(t, f, "/f", nil, true)
		must(t, f.SyncDir("/"))
		must(t, h.Truncate(100))
		must(t, h.Sync())
	}, "/f")
	if len(seen) != 1 || seen[string(make([]byte, 100))] != cuts {
		t.Fatalf("outcomes %v, want 100 zeros", seen)
	}
}

// TestUnsyncedTruncateMayNotSurvive ensures a truncation without fsync comes back either done or undone, the tail old or zeros.
func TestUnsyncedTruncateMayNotSurvive(t *testing.T) {
	old := pattern('o', 100)
	seen := outcomes(t, func(f *FS) {
		h := create(t, f, "/f", old, true)
		must(t, f.SyncDir("/"))
		must(t, h.Truncate(10))
	}, "/f")
	zeroTail := string(old[:10]) + string(make([]byte, 90))
	for s := range seen {
		if s != string(old[:10]) && s != string(old) && s != zeroTail {
			t.Fatalf("cut left %q", s)
		}
	}
	if seen[string(old[:10])] == 0 || seen[string(old)] == 0 {
		t.Fatalf("outcomes %v: want the truncation both kept and undone", seen)
	}
}

// TestUnsyncedCreateMayBeLost ensures a file whose directory was not fsynced is lost in some cuts, even with its data fsynced.
func TestUnsyncedCreateMayBeLost(t *testing.T) {
	seen := outcomes(t, func(f *FS) { create(t, f, "/f", []byte("data"), true) }, "/f")
	if seen["<missing>"] == 0 || seen["data"] == 0 || len(seen) != 2 {
		t.Fatalf("outcomes %v, want the file missing or whole", seen)
	}
}

// TestUnsyncedRenameMayBeUndone ensures a rename over a file without a directory fsync leaves the old file or the new one, never neither.
func TestUnsyncedRenameMayBeUndone(t *testing.T) {
	seen := outcomes(t, func(f *FS) {
		create(t, f, "/cp", []byte("old"), true)
		must(t, f.SyncDir("/"))
		create(t, f, "/cp.tmp", []byte("new"), true)
		must(t, f.Rename("/cp.tmp", "/cp"))
	}, "/cp")
	if seen["old"] == 0 || seen["new"] == 0 || len(seen) != 2 {
		t.Fatalf("outcomes %v, want old or new", seen)
	}
}

// TestPendingEntriesKeepAPrefix ensures a directory keeps its pending changes in order: a later one never without the earlier ones.
func TestPendingEntriesKeepAPrefix(t *testing.T) {
	names := []string{"/a", "/b", "/c", "/d"}
	kept := make(map[int]int)
	for seed := range uint64(cuts) {
		f := New()
		for _, n := range names {
			create(t, f, n, nil, true)
		}
		after := f.CutPower(rng(seed))
		k := 0
		for k < len(names) && contents(t, after, names[k]) != nil {
			k++
		}
		for _, n := range names[k:] {
			if contents(t, after, n) != nil {
				t.Fatalf("seed %d: %s kept without the names created before it", seed, n)
			}
		}
		kept[k]++
	}
	for k := range len(names) + 1 {
		if kept[k] == 0 {
			t.Fatalf("prefix lengths %v: %d never kept", kept, k)
		}
	}
}

// TestUnsyncedMkdirLosesItsTree ensures a directory whose own entry is not durable is lost with everything in it.
func TestUnsyncedMkdirLosesItsTree(t *testing.T) {
	seen := outcomes(t, func(f *FS) {
		must(t, f.MkdirAll("/d/e", 0o755))
		create(t, f, "/d/e/f", []byte("x"), true)
		must(t, f.SyncDir("/d/e"))
		must(t, f.SyncDir("/d"))
	}, "/d/e/f")
	if seen["<missing>"] == 0 || seen["x"] == 0 {
		t.Fatalf("outcomes %v, want the tree lost or kept", seen)
	}
}

// TestUnsyncedRemoveMayComeBack ensures a removal without a directory fsync may be undone, and SyncDir makes it stick.
func TestUnsyncedRemoveMayComeBack(t *testing.T) {
	setup := func(f *FS) {
		must(t, f.Mkdir("/d", 0o755))
		create(t, f, "/d/f", []byte("x"), true)
		must(t, f.SyncDir("/d"))
		must(t, f.SyncDir("/"))
		must(t, f.RemoveAll("/d"))
	}
	if seen := outcomes(t, setup, "/d/f"); seen["x"] == 0 || seen["<missing>"] == 0 {
		t.Fatalf("outcomes %v, want the removal undone in some cuts", seen)
	}
	synced := outcomes(t, func(f *FS) { setup(f); must(t, f.SyncDir("/")) }, "/d/f")
	if synced["<missing>"] != cuts {
		t.Fatalf("outcomes %v after SyncDir, want always removed", synced)
	}
}

// TestSyncFSMakesEverythingDurable ensures one SyncFS makes files, sizes and every directory's entries durable.
func TestSyncFSMakesEverythingDurable(t *testing.T) {
	seen := outcomes(t, func(f *FS) {
		must(t, f.MkdirAll("/a/b", 0o755))
		create(t, f, "/a/b/f", []byte("data"), false)
		must(t, f.SyncFS("/a"))
	}, "/a/b/f")
	if seen["data"] != cuts {
		t.Fatalf("outcomes %v, want always the data", seen)
	}
}

var errInjected = errors.New("injected EIO")

// TestFailedSyncLosesDataForGood ensures fsyncgate: after a failed fsync, a later successful one does not make the earlier writes durable.
func TestFailedSyncLosesDataForGood(t *testing.T) {
	seen := outcomes(t, func(f *FS) {
		h := create(t, f, "/f", []byte("old!"), true)
		must(t, f.SyncDir("/"))
		if _, err := h.WriteAt([]byte("new!"), 0); err != nil {
			t.Fatal(err)
		}
		f.SetFault(func(op Op) error {
			if op.Kind == OpSync {
				return errInjected
			}
			return nil
		})
		if err := h.Sync(); !errors.Is(err, errInjected) {
			t.Fatalf("Sync = %v, want the injected error", err)
		}
		f.SetFault(nil)
		buf := make([]byte, 4)
		if _, err := h.ReadAt(buf, 0); err != nil || string(buf) != "new!" {
			t.Fatalf("read %q, %v after the failed fsync: the page cache keeps the data", buf, err)
		}
		must(t, h.Sync()) // succeeds, as Linux's does, writing nothing
	}, "/f")
	if len(seen) != 1 || seen["old!"] != cuts {
		t.Fatalf("outcomes %v, want the data written before the failed fsync never durable", seen)
	}
}

// TestFaultFailsTheOperation ensures the hook sees each operation's kind and path, and an error it returns fails that operation alone, changing nothing.
func TestFaultFailsTheOperation(t *testing.T) {
	f := New()
	var seen []string
	f.SetFault(func(op Op) error {
		seen = append(seen, op.Kind.String()+" "+op.Path)
		if op.Kind == OpRename {
			return errInjected
		}
		return nil
	})
	h := create(t, f, "/a", []byte("x"), true)
	must(t, h.Close())
	err := f.Rename("/a", "/b")
	var le *os.LinkError
	if !errors.Is(err, errInjected) || !errors.As(err, &le) {
		t.Fatalf("Rename = %v, want a *os.LinkError wrapping the injected error", err)
	}
	if contents(t, f, "/a") == nil || contents(t, f, "/b") != nil {
		t.Fatal("the failed rename changed the entries")
	}
	want := []string{"open /a", "write /a", "sync /a", "close /a", "rename /a", "read /a", "read /b"}
	if !slices.Equal(seen, want) {
		t.Fatalf("hook saw %q, want %q", seen, want)
	}
}

// TestCutKillsTheOldFS ensures every operation of the old FS and of its open files fails with ErrPowerCut after a cut.
func TestCutKillsTheOldFS(t *testing.T) {
	f := New()
	h := create(t, f, "/a", []byte("x"), true)
	f.CutPower(rng(1))
	if _, err := h.WriteAt([]byte("y"), 0); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("WriteAt = %v", err)
	}
	if err := h.Sync(); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("Sync = %v", err)
	}
	if _, err := f.ReadDir("/"); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("ReadDir = %v", err)
	}
	if _, err := f.OpenFile("/b", os.O_CREATE|os.O_RDWR, 0o644); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("OpenFile = %v", err)
	}
}

// TestCutPowerAfter ensures an armed cut lets exactly n operations run and fails the next ones, leaving what they made durable.
func TestCutPowerAfter(t *testing.T) {
	f := New()
	f.CutPowerAfter(3, rng(1))
	h := create(t, f, "/a", []byte("x"), true) // open, write, sync
	if f.PowerCut() != nil {
		t.Fatal("cut before its operation")
	}
	if err := f.SyncDir("/"); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("4th operation = %v, want ErrPowerCut", err)
	}
	if err := h.Close(); !errors.Is(err, ErrPowerCut) {
		t.Fatalf("Close = %v", err)
	}
	after := f.PowerCut()
	if after == nil {
		t.Fatal("no FS after the cut")
	}
	if got := contents(t, after, "/a"); got != nil && string(got) != "x" {
		t.Fatalf("after the cut /a = %q", got)
	}
	if n := len(after.Report()); n != 1 {
		t.Fatalf("report %q, want the root's pending create", after.Report())
	}
}

// TestCutIsDeterministic ensures the same operations cut with the same seed leave the same files and report.
func TestCutIsDeterministic(t *testing.T) {
	build := func() *FS {
		f := New()
		for _, d := range []string{"/x", "/y", "/z"} {
			must(t, f.Mkdir(d, 0o755))
			for _, n := range []string{"/1", "/2", "/3"} {
				h := create(t, f, d+n, pattern(n[1], 3*PageSize), false)
				if _, err := h.WriteAt(pattern('w', PageSize), PageSize); err != nil {
					t.Fatal(err)
				}
			}
		}
		return f
	}
	dump := func(f *FS) string {
		var b strings.Builder
		b.WriteString(strings.Join(f.Report(), "\n"))
		for _, d := range []string{"/x", "/y", "/z"} {
			for _, n := range []string{"/1", "/2", "/3"} {
				b.Write(contents(t, f, d+n))
			}
		}
		return b.String()
	}
	for seed := range uint64(20) {
		if a, b := dump(build().CutPower(rng(seed))), dump(build().CutPower(rng(seed))); a != b {
			t.Fatalf("seed %d: two cuts differ", seed)
		}
	}
}

// TestFileSemantics ensures the operations the storage code relies on behave as package os's do.
func TestFileSemantics(t *testing.T) {
	f := New()
	if _, err := f.OpenFile("/missing", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open missing = %v", err)
	}
	must(t, f.Mkdir("/d", 0o755))
	if err := f.Mkdir("/d", 0o755); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("mkdir twice = %v", err)
	}
	if err := f.Mkdir("/x/y", 0o755); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("mkdir without parent = %v", err)
	}
	h := create(t, f, "/d/f", []byte("abc"), false)
	buf := make([]byte, 5)
	if n, err := h.ReadAt(buf, 1); n != 2 || err != io.EOF {
		t.Fatalf("short ReadAt = %d, %v", n, err)
	}
	if err := f.Remove("/d"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("remove non-empty dir = %v", err)
	}
	must(t, f.MkdirAll("/e", 0o755))
	if err := f.Rename("/d/f", "/e/f"); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("rename across dirs = %v", err)
	}
	w, err := f.OpenFile("/d/w", os.O_WRONLY|os.O_CREATE, 0o644)
	must(t, err)
	if _, err := w.Write([]byte("12")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("34")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ReadAt(buf, 0); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("read of a write-only file = %v", err)
	}
	must(t, w.Close())
	if err := w.Close(); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("second close = %v", err)
	}
	if data, err := f.ReadFile("/d/w"); err != nil || string(data) != "1234" {
		t.Fatalf("ReadFile = %q, %v", data, err)
	}
	entries, err := f.ReadDir("/d")
	must(t, err)
	if len(entries) != 2 || entries[0].Name() != "f" || entries[1].Name() != "w" || entries[0].IsDir() {
		t.Fatalf("ReadDir = %v", entries)
	}
	fi, err := h.Stat()
	must(t, err)
	if fi.Size() != 3 || fi.Name() != "f" {
		t.Fatalf("Stat = %v %d", fi.Name(), fi.Size())
	}
	must(t, f.RemoveAll("/d"))
	must(t, f.RemoveAll("/d"))
	if _, err := h.WriteAt([]byte("z"), 0); err != nil {
		t.Fatalf("write to an unlinked open file = %v", err)
	}
}
