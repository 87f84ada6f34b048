package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/replicad/replicad/core/vfs"
)

// WriteFileAtomic replaces path with data the way checkpoints are written
// (see writeAtomic); log dirs use it for meta.properties too.
func WriteFileAtomic(fsys vfs.FS, path string, data []byte, sync bool) error {
	return writeAtomic(fsys, path, data, sync)
}

// writeAtomic replaces path with data so that a crash leaves either the old
// file or the new one: write "<path>.tmp", fsync it, rename it over path, then
// fsync the directory so the rename itself survives (Kafka's CheckpointFile).
// Writers of one path must not run concurrently: they share the tmp file.
func writeAtomic(fsys vfs.FS, path string, data []byte, sync bool) (err error) {
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("checkpoint: create %s: %w", tmp, err)
	}
	renamed := false
	defer func() {
		if err != nil && !renamed {
			_ = fsys.Remove(tmp)
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
	if err = fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: rename %s: %w", tmp, err)
	}
	renamed = true
	if sync {
		if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	return nil
}

// readFile returns the file's contents, or nil and no error when it does not
// exist (a dir or partition that never wrote this checkpoint).
func readFile(fsys vfs.FS, path string) ([]byte, error) {
	data, err := fsys.ReadFile(path)
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
