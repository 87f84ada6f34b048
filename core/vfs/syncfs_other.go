//go:build !linux

package vfs

// syncFS falls back to fsyncing dir itself where syncfs(2) does not exist:
// that makes the dir's entries durable, but not unsynced file data.
func syncFS(dir string) error { return osFS{}.SyncDir(dir) }
