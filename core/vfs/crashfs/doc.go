// Package crashfs is an in-memory vfs.FS that remembers what was made
// durable and can lose power at any point, keeping only what a real disk
// under a journaling file system may keep (after SQLite's crash-test VFS,
// Pebble's strict MemFS and Jepsen's lazyfs). Tests run the real storage
// code on it to check fsync ordering, which a kill -9 never exercises: the
// page cache survives a process crash.
//
// # What survives a power cut
//
// File data: a write lands in the volatile view, which every read sees.
// File.Sync makes the file's dirty pages and its size durable. At a cut each
// page (PageSize) written since the last fsync independently comes back old
// (the durable bytes), new (the current bytes) or torn (each SectorSize
// sector old or new); the size comes back as the durable or the current one.
// Bytes past the durable size that no fsync wrote read as zeros, so a file
// extended without its data being synced ends in zeros. A truncation is a
// size change like any other: without an fsync it may or may not survive,
// and the truncated bytes may come back.
//
// Directory entries: creating, removing and renaming a name changes the
// volatile entries of its directory and appends to the directory's pending
// changes. SyncDir makes the current entries durable. At a cut every
// directory keeps its durable entries plus a random prefix of its pending
// changes, in order, as a journaling file system commits them; a rename is
// one change (kept whole or not at all), so a rename over an existing name
// that was not synced may leave the old file there. A file or directory
// whose name is not durable is lost with everything below it. SyncFS makes
// everything durable. Renames across directories are refused (EXDEV): the
// storage code renames within one directory only, and a journaled rename
// across two directories is not what the per-directory prefixes model.
//
// Failed fsyncs behave as Linux's do ("fsyncgate"): a Sync that fails marks
// the file's dirty pages clean without writing them, so the data written
// before it never becomes durable through a later Sync, which succeeds —
// unless the same page is written again and becomes dirty with it.
//
// # Faults and the cut
//
// SetFault installs a hook called before every operation with its Op; an
// operation whose hook returns an error fails with it (wrapped in an
// *fs.PathError) and changes nothing, except that a failed Sync drops the
// file's dirty pages as above. CutPower loses power at once and returns the
// file system as it is when the power comes back: a new FS holding only what
// the rules above allow, chosen with the given random source. CutPowerAfter
// arms a cut that happens just before a given later operation, inside the
// file system's lock, so that it can fall in the middle of a multi-step
// operation of the code under test. After a cut every operation of the old
// FS and of its open files fails with ErrPowerCut, so goroutines of the dead
// process see errors rather than a half-alive disk.
//
// Everything is deterministic for a given sequence of operations and a given
// random source: the cut walks directories in name order. Trace lists every
// operation with its outcome and Report (on the FS a cut returned) what the
// cut kept, for the failure messages of tests.
//
// Paths are slash-separated; a relative path is taken from the root.
package crashfs
