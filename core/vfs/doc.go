// Package vfs is the file-system seam of the storage code: every file
// operation of core/log, core/epoch, core/checkpoint and core/logmgr goes
// through an FS, so that tests can run the real storage code on a simulated
// disk (core/vfs/crashfs, which loses power) instead of the real one.
//
// FS and File declare what that code uses and no more. OS is the real file
// system, a thin layer over package os: OS.OpenFile returns the *os.File
// itself, so the append and read paths make the same syscalls as before,
// behind one interface call each.
//
// Errors keep package os's types (*fs.PathError and the like), so callers
// test them with errors.Is(err, fs.ErrNotExist) and friends whichever FS
// produced them.
//
// Two calls have no package os equivalent. SyncDir(dir) opens the directory
// and fsyncs it, making the creation, removal and renaming of its entries
// durable. SyncFS(dir) is Linux's syncfs(2): one call that writes back every
// dirty file and directory of the file system holding dir (elsewhere it falls
// back to SyncDir, which makes dir's entries durable but not file data).
package vfs
