package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic replaces path with data the way checkpoints are written
// (see writeAtomic); log dirs use it for meta.properties too.
func WriteFileAtomic(path string, data []byte, sync bool) error {
	return writeAtomic(path, data, sync)
}

// writeAtomic replaces path with data so that a crash leaves either the old
// file or the new one: write "<path>.tmp", fsync it, rename it over path, then
// fsync the directory so the rename itself survives (Kafka's CheckpointFile).
// Writers of one path must not run concurrently: they share the tmp file.
func writeAtomic(path string, data []byte, sync bool) (err error) {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("checkpoint: create %s: %w", tmp, err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("checkpoint: write %s: %w", tmp, err)
	}
	if sync {
		if err = f.Sync(); err != nil {
			_ = f.Close()
			return fmt.Errorf("checkpoint: fsync %s: %w", tmp, err)
		}
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("checkpoint: close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: rename %s: %w", tmp, err)
	}
	renamed = true
	if sync {
		return SyncDir(filepath.Dir(path))
	}
	return nil
}

// SyncDir fsyncs a directory, making the creation, removal and renaming of
// its entries durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("checkpoint: open dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("checkpoint: fsync dir %s: %w", dir, err)
	}
	return nil
}

// readFile returns the file's contents, or nil and no error when it does not
// exist (a dir or partition that never wrote this checkpoint).
func readFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: read %s: %w", path, err)
	}
	if data == nil {
		// An existing empty file must not look missing: it is malformed.
		data = []byte{}
	}
	return data, nil
}
