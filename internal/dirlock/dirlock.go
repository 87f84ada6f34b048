// Package dirlock holds a broker's log dirs for one process at a time, as
// Kafka's LogManager does with a ".lock" file in every log dir: two
// processes appending to and truncating the same segment files destroy
// them, whatever broker id either says it is. The lock is an flock(2) on
// the file, so the kernel drops it when the holder dies (kill -9 included):
// a broker restarted at once takes its dirs back without waiting.
//
// The file also names its holder (pid, broker id, start time), so that a
// second process refused the lock can say who holds it. That text is
// written only once the lock is held, and is informative only: a file left
// by a dead holder still names it, but nobody holds its lock then.
package dirlock

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// FileName is the lock file in every log dir.
const FileName = ".lock"

// ErrLocked is a log dir whose lock another process holds.
var ErrLocked = errors.New("log dir is in use by another process")

// Lock holds the lock of every dir it was acquired for, until Release.
type Lock struct {
	files []*os.File
}

// Acquire takes the lock of every dir, creating a missing dir (durably) and
// its lock file, and writes holder into each lock file. It returns
// ErrLocked, naming the dir and the holder the file names, at the first dir
// another process holds, having released what it took: the caller must
// then write nothing to any of them.
//
// A dir that cannot be locked for another reason (it cannot be created, its
// disk fails) is not a reason to refuse the start: the broker runs without
// a failed dir, which the log manager takes offline when it meets the same
// error. Such dirs come back in unlocked, with their errors, for the caller
// to log; nothing is written to them through this process.
func Acquire(dirs []string, holder string) (l *Lock, unlocked map[string]error, err error) {
	l = &Lock{}
	for _, dir := range dirs {
		f, err := lockDir(dir, holder)
		switch {
		case errors.Is(err, ErrLocked):
			l.Release()
			return nil, nil, err
		case err != nil:
			if unlocked == nil {
				unlocked = make(map[string]error)
			}
			unlocked[dir] = err
		default:
			l.files = append(l.files, f)
		}
	}
	return l, unlocked, nil
}

func lockDir(dir, holder string) (*os.File, error) {
	if err := mkdirDurable(dir); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	// No O_TRUNC: the holder's text must survive until the lock is ours.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	held, err := tryLock(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if !held {
		b, _ := os.ReadFile(path)
		f.Close()
		who := strings.TrimSpace(string(b))
		if who == "" {
			who = "a process that has not named itself yet"
		}
		return nil, fmt.Errorf("%w: %s is held by %s (%s)", ErrLocked, dir, who, path)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(holder+"\n"), 0)
	}
	return f, nil
}

// Release drops every lock held (closing the file drops its flock).
func (l *Lock) Release() {
	if l == nil {
		return
	}
	for _, f := range l.files {
		f.Close()
	}
	l.files = nil
}

// mkdirDurable creates dir and its missing parents, fsyncing the parent of
// each one it creates (as core/logmgr does: a log dir whose own entry a
// power loss takes away takes every log in it along).
func mkdirDurable(dir string) error {
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) {
		if parent := filepath.Dir(dir); parent != dir {
			if err := mkdirDurable(parent); err != nil {
				return err
			}
		}
		err = os.Mkdir(dir, 0o755)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	d, err := os.Open(filepath.Dir(dir))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
