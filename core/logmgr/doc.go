// Package logmgr owns a broker's log dirs (Kafka's LogManager): meta.properties,
// loading and recovering every partition log at start, choosing a dir for a new
// log, the recovery-point and log-start-offset checkpoints, and taking a dir
// offline when its disk fails.
//
// Each log dir holds:
//
//	meta.properties                    version=0, broker.id=N
//	recovery-point-offset-checkpoint   written by CheckpointLogOffsets
//	log-start-offset-checkpoint        written by CheckpointLogOffsets
//	replication-offset-checkpoint      the HWs, written by the replica manager
//	<topic>-<partition>/               one partition log
//	<topic>-<partition>.<id>-delete/   a deleted log, removed in the background
//	<topic>-<partition>.<id>-future/   a replica being moved here (alter log dirs)
//
// A dir that fails (unreadable meta.properties or checkpoints, a log that
// cannot be opened, a failed write) goes offline alone: the broker keeps
// serving its other dirs. The manager reports IO failures of its own on
// Failures; the replica manager answers with MarkDirOffline, which forgets the
// dir's logs so their partitions can be taken offline (Kafka's
// LogDirFailureChannel). Only a dir that belongs to another broker is fatal.
//
// Future replica dirs are skipped by Open (neither loaded nor deleted) until
// alter log dirs is implemented; the replica they belong to keeps serving from
// its current dir.
package logmgr
