package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestOSOpenFileMissing ensures a failed open returns a nil File, not a nil *os.File inside one.
func TestOSOpenFileMissing(t *testing.T) {
	f, err := OS.OpenFile(filepath.Join(t.TempDir(), "missing"), os.O_RDWR, 0)
	if !errors.Is(err, fs.ErrNotExist) || f != nil {
		t.Fatalf("OpenFile = %v, %v; want nil, ErrNotExist", f, err)
	}
}

// TestOSSyncDirAndFS ensures SyncDir and SyncFS succeed on a dir and fail, naming it, on a missing one.
func TestOSSyncDirAndFS(t *testing.T) {
	dir := t.TempDir()
	if err := OS.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := OS.SyncFS(dir); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	if err := OS.SyncDir(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncDir(missing) = %v, want ErrNotExist", err)
	}
	if err := OS.SyncFS(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("SyncFS(missing) = %v, want ErrNotExist", err)
	}
}

// TestOr ensures a nil FS means the real one.
func TestOr(t *testing.T) {
	if Or(nil) != OS {
		t.Fatal("Or(nil) is not OS")
	}
}
