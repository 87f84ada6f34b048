// Package checkpoint reads and writes Kafka's checkpoint files.
//
// The text format, exactly Kafka's: line 1 the version "0", line 2 the entry
// count, then one entry a line with fields separated by one space:
// "topic partition offset" for offset checkpoints (replication-offset-checkpoint,
// recovery-point-offset-checkpoint, log-start-offset-checkpoint) and
// "epoch start_offset" for leader-epoch-checkpoint. Every line ends in '\n'.
//
// A write goes to "<name>.tmp", is fsynced, renamed over the file, and the
// directory is fsynced, so a crash leaves either the old file or the new one.
// Writers of the same file must be serialized by the caller. Every function
// takes the vfs.FS the file is on (vfs.OS in production).
//
// Reading is strict, because a checkpoint that is misread could silently reset
// a high watermark or a leader epoch: a wrong version, an entry count that does
// not match the entries, a wrong number of fields, a field that is not a
// number, a negative partition, offset or epoch, an illegal topic, anything
// after the last entry, a duplicate entry, and an existing but empty file are
// all ErrMalformed (a *ParseError naming the line). Only a missing file reads
// as empty.
package checkpoint
