package vfs

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// FS is the file system the storage code runs on.
type FS interface {
	// OpenFile opens name with os.OpenFile's flags (O_RDONLY, O_WRONLY,
	// O_RDWR, O_CREATE, O_EXCL, O_TRUNC) and permissions.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// ReadFile returns the whole content of name.
	ReadFile(name string) ([]byte, error)
	Mkdir(name string, perm fs.FileMode) error
	MkdirAll(name string, perm fs.FileMode) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything below it; a missing name is no error.
	RemoveAll(name string) error
	// Rename renames oldpath to newpath, replacing a file already there.
	Rename(oldpath, newpath string) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// SyncDir fsyncs the directory dir: the creation, removal and renaming
	// of its entries become durable.
	SyncDir(dir string) error
	// SyncFS makes everything written to the file system holding dir
	// durable (syncfs(2)).
	SyncFS(dir string) error
}

// File is an open file. *os.File implements it.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Writer
	// Sync fsyncs the file's data and size.
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Close() error
	// Name is the path the file was opened with.
	Name() string
}

// OS is the real file system.
var OS FS = osFS{}

// Or returns fsys, or OS when fsys is nil: configurations leave FS unset
// to mean the real file system.
func Or(fsys FS) FS {
	if fsys == nil {
		return OS
	}
	return fsys
}

type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		// A nil *os.File in a non-nil File would not compare equal to nil.
		return nil, err
	}
	return f, nil
}

func (osFS) ReadFile(name string) ([]byte, error)         { return os.ReadFile(name) }
func (osFS) Mkdir(name string, perm fs.FileMode) error    { return os.Mkdir(name, perm) }
func (osFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (osFS) Rename(oldpath, newpath string) error         { return os.Rename(oldpath, newpath) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error)   { return os.ReadDir(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

func (osFS) SyncFS(dir string) error { return syncFS(dir) }
