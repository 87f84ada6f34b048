// Package logmgr owns a broker's log dirs (Kafka's LogManager): meta.properties,
// loading and recovering every partition log at start, choosing a dir for a new
// log, the recovery-point and log-start-offset checkpoints, and taking a dir
// offline when its disk fails.
//
// Each log dir holds:
//
//	meta.properties                    version=0, broker.id=N
//	broker-state                       the broker epoch of this life, the boot id, whether it
//	                                   shut down cleanly (RecordBrokerEpoch, Shutdown; epoch -1
//	                                   once a dir failed in this life)
//	recovery-point-offset-checkpoint   written by CheckpointLogOffsets, by every truncation that
//	log-start-offset-checkpoint        lowers a log's recovery point (before it cuts), by
//	                                   DeleteLog and the log dir moves, and by Open when stale
//	replication-offset-checkpoint      the HWs, written by CheckpointHighWatermarks (the replica
//	                                   manager's), by DeleteLog and the log dir moves, and by
//	                                   LoadHighWatermarks when stale
//	<topic>-<partition>/               one partition log, with its partition.metadata (topic ID)
//	<topic>-<partition>.<id>-delete/   a deleted log, removed in the background
//	<topic>-<partition>.<id>-future/   a replica being moved here (alter log dirs)
//
// A dir that fails (unreadable meta.properties or checkpoints, a log that
// cannot be opened, a failed write) goes offline alone: the broker keeps
// serving its other dirs. Every storage failure is reported on Failures:
// the manager's own, and its logs' (each reports its first I/O failure, see
// logOptions); the replica manager answers with MarkDirOffline, which
// forgets the dir's logs so their partitions can be taken offline (Kafka's
// LogDirFailureChannel). Running out of file descriptors is not reported
// (log.ErrFileLimit) unless a log failed on it. Only a dir that belongs to
// another broker is fatal.
//
// Open loads future logs with the current ones: a future log whose current
// log is gone (a swap cut between its renames) becomes the current log, and
// one found damaged at rest is cut at the damage, the move copying the rest
// again.
package logmgr
