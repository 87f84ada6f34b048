package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A second holder is refused, told who holds the dir, and leaves the
// holder's text alone; once released, the dir can be taken again, and a
// dir that did not exist is created.
func TestSecondHolderIsRefusedAndNamesTheFirst(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "new", "b")
	first, _, err := Acquire([]string{a, b}, "pid=1 broker.id=2")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = Acquire([]string{filepath.Join(base, "c"), b}, "pid=9 broker.id=2")
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid=1 broker.id=2") || !strings.Contains(err.Error(), b) {
		t.Fatalf("second Acquire: %v, want ErrLocked naming %s and pid=1 broker.id=2", err, b)
	}
	if got, _ := os.ReadFile(filepath.Join(b, FileName)); string(got) != "pid=1 broker.id=2\n" {
		t.Fatalf("lock file holds %q after the refusal", got)
	}
	// What the refused Acquire took (dir c) it gave back.
	third, _, err := Acquire([]string{filepath.Join(base, "c")}, "pid=3")
	if err != nil {
		t.Fatalf("dir c still held after a refused Acquire: %v", err)
	}
	third.Release()
	first.Release()
	again, _, err := Acquire([]string{a, b}, "pid=4 broker.id=2")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	again.Release()
	if got, _ := os.ReadFile(filepath.Join(a, FileName)); string(got) != "pid=4 broker.id=2\n" {
		t.Fatalf("lock file holds %q, want the new holder", got)
	}
}

// A dir that cannot be locked for another reason than a holder (here a
// file stands where the dir should be) does not fail the others: it comes
// back unlocked, for the log manager to take offline.
func TestUnusableDirIsLeftToTheLogManager(t *testing.T) {
	base := t.TempDir()
	bad := filepath.Join(base, "bad")
	if err := os.WriteFile(bad, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(base, "good")
	l, unlocked, err := Acquire([]string{bad, good}, "pid=1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if len(unlocked) != 1 || unlocked[bad] == nil {
		t.Fatalf("unlocked %v, want %s alone", unlocked, bad)
	}
	if _, _, err := Acquire([]string{good}, "pid=2"); !errors.Is(err, ErrLocked) {
		t.Fatalf("the good dir was not locked: %v", err)
	}
}
