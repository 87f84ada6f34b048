// Package crashtest holds the power-loss simulation of the storage code
// (powerloss_test.go): the real core/log, core/epoch, core/checkpoint and
// core/logmgr code run on core/vfs/crashfs, which loses power at a random
// operation and keeps only what was made durable. After each cut the
// simulation recovers (logmgr.Open, the HW checkpoint read) and checks what
// each flush policy promises: every acknowledged (every-batch) or flushed
// (interval, os) record is there, at its offset, with its epoch and
// content; nothing else is there but records once written at their
// offsets; every batch of every segment is whole (recovery trusts what is
// below the recovery point without reading it); the recovery-point and HW
// checkpoints claim no more than is on disk; the leader-epoch cache matches
// the batches; recovery never fails and never loses a log that was durably
// created.
//
// It runs in `go test`, a few thousand seeds per flush policy; a failure
// prints the seed, the command that replays it (-crash.seed), the steps
// and file operations that led to the cut and what the cut kept.
// -crash.seeds=N runs more (`make crash-test SEEDS=N`). The package has no
// code of its own: the simulation is a test.
package crashtest
