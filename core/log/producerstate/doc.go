// Package producerstate is one partition's idempotent-producer state (Kafka's
// ProducerStateManager and ProducerAppendInfo): for each producer ID that
// appended a v1 batch, its epoch and the metadata of its last MaxBatches
// batches. The log owns a Manager and changes it under its append lock,
// atomically with the appends; every replica builds the same state from the
// same batches.
//
// # Validation (a leader's append)
//
// Check decides a client's batch before it is appended:
//
//   - no state for the producer (never seen, expired, evicted, or its
//     batches truncated or deleted away): base sequence 0 starts one; any
//     other is ErrUnknownProducerID;
//   - an epoch older than the state's: ErrInvalidProducerEpoch;
//   - a newer epoch: accepted only with base sequence 0 (else
//     ErrOutOfOrderSequence), and it fences the older epoch from then on;
//   - the same epoch: a batch whose first and last sequence match one of the
//     last MaxBatches batches is a duplicate, answered with that batch's
//     offsets; base sequence = last sequence + 1 (wrapping past MaxInt32 to
//     0) is appended; anything else is ErrOutOfOrderSequence.
//
// Apply records an appended batch, the leader's after Check and a
// follower's or recovery's without it: the log says what happened. A batch
// of a different epoch resets the producer's batch metadata to that batch.
//
// # Bounds
//
// A producer whose last batch's max timestamp is ExpirationMs or more
// before now goes at the owner's periodic check (Expire: Kafka's
// producer.id.expiration.ms). At most MaxProducers are held: past that, the
// ones whose last batch is oldest in the log go, down to 90% of the bound,
// so the cost of the sort is paid once per MaxProducers/10 new producers.
// By log order, not by timestamp: every replica evicts the same producers,
// and a client's timestamps cannot pick them.
//
// # Snapshot format, version 1
//
// The state at an offset (every batch below it applied) is written to
// "<offset, 20 digits>.snapshot" in the partition directory, big-endian:
//
//	version      int16   1
//	crc          uint32  CRC-32C (Castagnoli) of everything after this field
//	offset       int64   the snapshot's offset (as in the file name)
//	count        int32   producers
//	producers... each:
//	  producerId    int64
//	  producerEpoch int16
//	  batchCount    uint8   1..MaxBatches
//	  batches...    oldest first, each:
//	    firstSequence int32
//	    lastSequence  int32
//	    firstOffset   int64
//	    lastOffset    int64
//	    maxTimestamp  int64
//
// A file is written as "<name>.tmp", fsynced, renamed over the name, and
// the directory fsynced (WriteSnapshot). Unlike Kafka's, which keeps only
// each producer's last batch, all MaxBatches batches are kept, so a retry
// of any of them after a restart is still recognised.
package producerstate
