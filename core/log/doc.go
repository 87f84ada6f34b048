// Package log is one partition's segmented, append-only log on disk (Kafka's
// UnifiedLog with its LocalLog and LogSegments).
//
// # Layout
//
// The partition directory holds the segments and the leader-epoch cache's
// checkpoint:
//
//	00000000000000000000.log     record batches, exactly as appended
//	00000000000000000000.index   sparse offset index of that segment
//	00000000000000052817.log     the next segment, named by its base offset
//	00000000000000052817.index
//	00000000000000052817.snapshot  producer state at that offset (roll)
//	leader-epoch-checkpoint
//
// The last segment is the active one; when an append would take it past
// Config.SegmentBytes the log rolls: the segment is sealed (fsynced, index
// included) and a new one starts at the LEO. Index entries (relative offset
// uint32, position uint32) are added every Config.IndexIntervalBytes and read
// with pread, never loaded into memory or preallocated; an index file is
// created with its first entry (or when its segment is sealed), so a new or
// idle-empty partition is one file and one descriptor. An idle log holds
// about 1.2 KiB of heap (BenchmarkIdleLogMemory), whatever its size.
//
// # Open files
//
// Segment and index files are opened through Options.FileCache, which a
// broker's logs share: it keeps at most its capacity open, closing the
// least recently used idle files (fsyncing those with unsynced writes
// first) and reopening them on their next use, so a broker hosts more logs
// than it has descriptors. Each use pins the file for the one call, so
// nothing in progress loses its descriptor; a file is reopened O_RDWR
// without O_CREATE, so one removed meanwhile is an error, never a new
// empty file. Reopen errors are the I/O errors they would have been:
// running out of descriptors is ErrFileLimit, anything else fails the log.
//
// # Offsets
//
// LogStartOffset <= HighWatermark <= LogEndOffset, and RecoveryPoint <=
// LogEndOffset: everything below the recovery point is fsynced. The HW is
// kept here but set by the owner (UpdateHighWatermark); truncation lowers it.
// Leader epochs: AppendAsLeader records (epoch, LEO) when the epoch is new,
// AppendAsFollower records each batch's epoch at its base offset when newer
// than the latest, TruncateTo trims the cache, TruncateFullyAndStartAt clears it.
//
// # Producer state
//
// The log keeps the idempotent producers' state (package producerstate:
// per producer ID its epoch and its last five batches), changed under mu
// with the appends, so a check and its append are atomic. A leader's
// append of a v1 batch (record.Batch.HasProducer) is checked first:
// ErrOutOfOrderSequence, ErrInvalidProducerEpoch and ErrUnknownProducerID
// refuse it, appending nothing; a retry of one of the producer's last five
// batches appends nothing and returns the original batch's offsets with
// AppendInfo.Duplicate. Every batch written (the leader's, a follower's,
// one recovered) updates the state, unchecked for followers: every
// replica holds what its log says.
//
// A truncation rolls the state back to what the remaining log says: it is
// reloaded from the newest sound snapshot at or below the new log end and
// the batches after it are replayed (headers only); snapshots above the
// new end are deleted, durably, first. A full truncation clears it, and a
// raised log start drops the producers whose batches are all below it.
// Open rebuilds it the same way, after recovery.
//
// Snapshots ("<offset, 20 digits>.snapshot", format in producerstate) hold
// the state at their offset. A roll serialises the state in memory and the
// background sealer writes it once the rolled segment is fsynced (so a
// snapshot never describes batches a power loss can take, and the roll
// waits for no disk); Close writes one at the log end. Each is written to
// a temporary file, fsynced, renamed and the directory fsynced. The newest
// three are kept, none below the log start. A damaged snapshot (CRC,
// version, length), or one above the log end, is deleted and an older one,
// or the log from its start, used instead: a snapshot only saves reading.
//
// Producers idle longer than Config.ProducerIDExpirationMs go at the
// owner's periodic RemoveExpiredProducers; past Config.MaxProducers the
// ones whose last batch is oldest in the log go at once.
//
// # Recovery
//
// Open re-reads every batch from the segment holding the recovery point on
// (starting at an index entry at or below it) and every segment whose index
// is missing or fails its sanity check. Each batch must be whole, pass its
// CRC and continue the offsets; the first that does not is truncated with
// everything after it, later segments deleted, the index rebuilt, and leader
// epochs starting beyond the new LEO dropped; as in Kafka, a verified batch
// whose epoch is newer than the cache's latest adds it. Recovery never keeps a batch that
// fails its CRC: torn writes and garbage after a crash are cut, not served.
//
// # Flush policies and durability
//
// A write reaches the page cache before an append returns, in every policy,
// so a crash of the process (kill -9) loses nothing: the kernel writes the
// pages back. The policies differ only in what a power loss or kernel crash
// can take:
//
//   - FlushEveryBatch: an append returns after its bytes are fsynced; nothing
//     acknowledged is lost. Group commit keeps it affordable: the fsync runs
//     outside the log lock, and appenders that arrive during one are all
//     covered by the next, so N concurrent producers share about one fsync
//     per round instead of N. A lone producer still pays one fsync per batch.
//   - FlushInterval: appends do not fsync; the owner calls Flush every
//     Config.FlushInterval. A power loss can lose up to that interval of
//     acknowledged appends that were not yet replicated elsewhere.
//   - FlushOS: the log never fsyncs appended data except on roll, Close and
//     truncation; durability comes from replication, as in Kafka by default.
//     A power loss can lose whatever the kernel had not yet written back and
//     no replica holds.
//
// A truncation fsyncs the segment it cuts (and the directory, when it
// removes segments) before it trims the epoch cache: a power loss must not
// bring back cut batches under epochs the durable cache no longer has, nor
// removed segments after a cut one.
//
// Throughput runs the other way: FlushOS and FlushInterval append at memory
// speed, FlushEveryBatch at the disk's fsync rate times the group size.
//
// # Concurrency
//
// A Log is safe for concurrent use. Appends, rolls and truncation serialise on
// one mutex; fsyncs of appended data run outside it, but for a truncation's. Reads take no lock: they
// see a segment list that writers replace rather than modify, and segment
// sizes that are published only after the bytes are written. Truncation, the
// one writer that rewrites bytes a reader might be reading, runs inside a
// sequence counter that makes an overlapping read retry. LogEndOffset,
// HighWatermark, LogStartOffset and RecoveryPoint are atomic loads.
//
// # Storage failures
//
// Every I/O failure (a write, an fsync, a roll, a truncation, an epoch
// checkpoint, a read the disk fails) is wrapped in ErrStorage and fails the
// log for good: it takes no more appends, flushes or truncations, and its
// recovery point never moves again. After a failed fsync Linux may mark
// the dirty pages clean and report the next fsync of the file as a success
// (PostgreSQL's "fsyncgate"), so a retry could count lost bytes durable.
// The first failure is reported once to Options.OnStorageError: the log
// manager takes the log dir offline (Kafka's LogDirFailureChannel), and a
// restart recovers what was durable before it. A truncation that fails
// partway leaves the offsets where the segments left end.
//
// Running out of file descriptors (EMFILE, ENFILE) is not a disk failure:
// the append, flush or Open that needed a file fails with ErrFileLimit and
// leaves nothing of itself behind (but the batches before a follower
// append's failed roll, which are appended), and the log goes on. So does a
// truncation whose checkpoint before the cut could not be opened; one that
// ran out of descriptors partway fails the log, as it may have cut part of
// what it meant to.
//
// A damaged batch found by a read is record.ErrCorrupt, not a storage
// failure: the log stays usable and the owner decides (core's corruption.go).
//
// # Damage at rest
//
// Recovery reads the segments from the recovery point on, and any segment
// below it whose index is missing or unsound. A bad batch past the
// recovery point is a torn tail and is cut off. One below it was fsynced
// and then damaged (a failing disk): the log opens damaged (Damaged), cuts
// nothing, serves what precedes the damage, and waits for its owner to
// repair it (RepairDamage) once another replica can supply the rest;
// Config.TruncateDamaged restores Kafka's cut. For the recovery point to
// mean this, a truncation has the owner checkpoint its lowered recovery
// point (Options.OnRecoveryPointLowered) before it cuts: a cut interrupted
// by a power loss may leave its page zeroed under the old file size.
package log
