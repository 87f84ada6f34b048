//go:build !linux

package logmgr

import "github.com/replicad/replicad/core/checkpoint"

// syncFS falls back to fsyncing dir itself where syncfs(2) does not exist:
// that makes the dir's entries durable, but not unsynced file data.
func syncFS(dir string) error { return checkpoint.SyncDir(dir) }
