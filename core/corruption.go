package core

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// Batches damaged at rest.
//
// Every batch a broker serves, to a consumer, a follower or a move's copy,
// is checked first (its CRC and its place): a damaged one is answered
// CORRUPT_MESSAGE and never served. Damage is a fault of one log's data,
// not of the disk, so the log dir stays online; but a replica whose log
// lost data it committed must not go on leading, or be copied, since the
// other replicas of the ISR hold a good copy. The partition goes offline on
// this broker (its heartbeats then report the
// replica offline, and the controller moves the leadership to a healthy ISR
// member and keeps this one out of the ISR), as Kafka takes a replica
// offline on a storage error.

// corruptBatch is a damaged batch met at offset while reading a log.
type corruptBatch struct {
	offset int64
	err    error
}

func (e *corruptBatch) Error() string {
	return fmt.Sprintf("corrupt batch at offset %d: %v", e.offset, e.err)
}

func (e *corruptBatch) Unwrap() error { return record.ErrCorrupt }

// verifyBatches returns the batches of data, read from a log starting at
// offset, up to the first that is damaged, and that one as a corruptBatch
// (nil when all are sound). Damaged: it does not parse, fails its CRC, or
// has a base offset (outside the CRC) that its place contradicts: the first
// must hold offset, and each next one start where the one before ended.
// (The leader epoch is outside the CRC too, and not checked.)
func verifyBatches(data []byte, offset int64) ([]byte, *corruptBatch) {
	rest, n := data, 0
	next := int64(-1) // where the next batch must start; -1: the first holds offset
	for len(rest) > 0 {
		b, after, err := record.Next(rest)
		if err == nil {
			// The CRC alone: the batch passed Verify when it was appended.
			err = b.VerifyChecksum()
		}
		if err == nil {
			err = placeError(b, offset, next)
		}
		if err != nil {
			at := offset
			if next >= 0 {
				at = next
			}
			return data[:n], &corruptBatch{offset: at, err: err}
		}
		n += len(b)
		rest = after
		next = b.NextOffset()
	}
	return data, nil
}

// placeError says why b cannot be the batch read where it was: the first
// (next < 0) must hold offset, a later one start at next. (A log's read
// already refuses a first batch that starts past offset; the check stands
// for the other readers.)
func placeError(b record.Batch, offset, next int64) error {
	switch {
	case next < 0 && (b.BaseOffset() > offset || b.LastOffset() < offset):
		return fmt.Errorf("%w: batch at base offset %d (last %d) read for offset %d", record.ErrCorrupt, b.BaseOffset(), b.LastOffset(), offset)
	case next >= 0 && b.BaseOffset() != next:
		return fmt.Errorf("%w: batch at base offset %d follows one ending at %d", record.ErrCorrupt, b.BaseOffset(), next)
	}
	return nil
}

// readVerified reads l from offset (as log.Read does) and returns its sound
// batches for a replica: ErrOffsetOutOfRange when offset left the log,
// ErrCorruptMessage (with a corruptBatch error) when the first batch is
// damaged, ErrStorageError (with the error) when reading failed. The
// batches after a damaged one are left for the next read, which reports it.
func readVerified(l *log.Log, offset int64, maxBytes int, maxOffset int64) ([]byte, ErrorCode, error) {
	ri, err := l.Read(offset, maxBytes, maxOffset)
	switch {
	case errors.Is(err, log.ErrOffsetOutOfRange):
		return nil, ErrOffsetOutOfRange, nil
	case errors.Is(err, record.ErrCorrupt):
		return nil, ErrCorruptMessage, &corruptBatch{offset: offset, err: err}
	case err != nil:
		return nil, storageErrorCode(err), err
	}
	data, bad := verifyBatches(ri.Data, offset)
	if bad != nil && len(data) == 0 {
		return nil, ErrCorruptMessage, bad
	}
	return data, ErrNone, nil
}

// handleReadError takes partition t offline on this broker when err, from
// reading its log, is a damaged batch (a *corruptBatch): see the comment on
// corruption above. The log dir stays online. Any other error of the disk
// has taken the log dir offline already (the log reports it itself).
func (rm *ReplicaManager) handleReadError(ctx context.Context, t tp.TopicPartition, err error) {
	var cb *corruptBatch
	if !errors.As(err, &cb) {
		return
	}
	rm.stateChangeMu.Lock()
	defer rm.stateChangeMu.Unlock()
	h := rm.getPartition(t)
	if h == nil || h.offline.Load() {
		return
	}
	rm.stateLog.Error().Str("topic", t.Topic).Int32("partition", t.Partition).Int64("offset", cb.offset).Err(cb.err).
		Msg("A batch of the log is damaged: taking the partition offline on this broker (the controller moves its leadership to another ISR member)")
	rm.cfg.Fetchers.RemoveFetcherForPartitions([]tp.TopicPartition{t})
	rm.cfg.AlterLogDirsFetchers.RemoveFetcherForPartitions([]tp.TopicPartition{t})
	rm.markPartitionOffline(ctx, t, offlineCorrupt, cb, attribute.Int64("replicad.offset", cb.offset))
}
