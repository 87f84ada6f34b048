package log

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/replicad/replicad/core/record"
)

// AppendAsLeader stamps the batch with base offset = LEO and leaderEpoch,
// records the epoch start in the epoch cache, appends, and flushes as the
// policy says. The batch must pass record.Batch.Verify (else an error
// wrapping record.ErrCorrupt); its bytes are stamped in place.
func (l *Log) AppendAsLeader(b record.Batch, leaderEpoch int32) (AppendInfo, error) {
	info, err := l.AppendAsLeaderUnflushed(b, leaderEpoch)
	return l.finishAppend(info, err)
}

// AppendAsLeaderUnflushed is AppendAsLeader without waiting for the flush
// policy: the caller calls WaitFlushed once it has released its own locks, so
// that no partition lock is held across an fsync (where it would stall
// everyone queued behind a writer of that lock, and defeat group commit).
func (l *Log) AppendAsLeaderUnflushed(b record.Batch, leaderEpoch int32) (AppendInfo, error) {
	if len(b) > l.cfg.MaxBatchBytes {
		return AppendInfo{}, fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, len(b), l.cfg.MaxBatchBytes)
	}
	if err := b.Verify(); err != nil {
		return AppendInfo{}, fmt.Errorf("append as leader: %w", err)
	}
	l.mu.Lock()
	if err := l.appendableLocked(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	// The producer's sequence is checked with the append, under mu: two
	// batches of one producer cannot both pass against the same state.
	pinfo, dup, err := l.checkProducerLocked(b)
	if err != nil || dup {
		l.mu.Unlock()
		return pinfo, err
	}
	base := l.logEndOffset.Load()
	// Kafka records the epoch's first offset before writing its first batch.
	// Here it is recorded in memory; the flush that moves the recovery point
	// past the batch writes it durably first (syncOnce), so no fsync runs
	// under mu on the produce path.
	if leaderEpoch >= 0 && leaderEpoch > l.epochs.LatestEpoch() {
		if err := l.assignEpochLocked(leaderEpoch, base); err != nil {
			l.mu.Unlock()
			return AppendInfo{}, err
		}
	}
	b.SetBaseOffset(base)
	b.SetLeaderEpoch(leaderEpoch)
	info, err := l.appendLocked(b, []record.Batch{b})
	l.mu.Unlock()
	info.Fenced, info.FencedEpoch = pinfo.Fenced, pinfo.FencedEpoch
	return info, err
}

// WaitFlushed returns once an append made with AppendAsLeaderUnflushed is as
// durable as the flush policy promises (at once unless FlushEveryBatch).
func (l *Log) WaitFlushed(info AppendInfo) error {
	_, err := l.finishAppend(info, nil)
	return err
}

// AppendAsFollower appends raw batches fetched from the leader. Each batch is
// CRC-checked and must start at the LEO; nothing is appended when any batch
// fails (record.ErrCorrupt, record.ErrTruncated, ErrBatchTooLarge,
// ErrOffsetMismatch). Empty data appends nothing and returns
// FirstOffset = LEO, LastOffset = LEO-1.
func (l *Log) AppendAsFollower(data []byte) (AppendInfo, error) {
	var batches []record.Batch
	for rest := data; len(rest) > 0; {
		b, next, err := record.Next(rest)
		if err == nil && len(b) > l.cfg.MaxBatchBytes {
			err = fmt.Errorf("%w: %d bytes, limit %d", ErrBatchTooLarge, len(b), l.cfg.MaxBatchBytes)
		}
		if err == nil {
			err = b.Verify()
		}
		if err == nil && len(batches) > 0 && b.BaseOffset() != batches[len(batches)-1].NextOffset() {
			err = fmt.Errorf("%w: base offset %d follows %d", ErrOffsetMismatch, b.BaseOffset(), batches[len(batches)-1].LastOffset())
		}
		if err != nil {
			return AppendInfo{}, fmt.Errorf("append as follower: batch %d: %w", len(batches), err)
		}
		batches = append(batches, b)
		rest = next
	}

	l.mu.Lock()
	if err := l.appendableLocked(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	leo := l.logEndOffset.Load()
	if len(batches) == 0 {
		l.mu.Unlock()
		return AppendInfo{FirstOffset: leo, LastOffset: leo - 1}, nil
	}
	if base := batches[0].BaseOffset(); base != leo {
		l.mu.Unlock()
		return AppendInfo{}, fmt.Errorf("append as follower: %w: base offset %d, log end offset %d", ErrOffsetMismatch, base, leo)
	}
	// As Kafka does, a follower learns where each new epoch starts from the
	// batches themselves.
	for _, b := range batches {
		if e := b.LeaderEpoch(); e > l.epochs.LatestEpoch() {
			if err := l.assignEpochLocked(e, b.BaseOffset()); err != nil {
				l.mu.Unlock()
				return AppendInfo{}, err
			}
		}
	}
	info, err := l.appendLocked(data, batches)
	if err != nil {
		return AppendInfo{}, l.abandonFollowerAppendLocked(leo, err)
	}
	l.mu.Unlock()
	return l.finishAppend(info, err)
}

// abandonFollowerAppendLocked ends a follower append that failed after
// starting at leo, with mu held, which it releases. A roll that failed for
// want of a descriptor may have let a prefix of the batches in: the epochs
// assigned for the batches that did not go are removed, and under
// FlushEveryBatch the prefix is fsynced before the fetcher reports the new
// log end to the leader, which counts it toward the HW.
func (l *Log) abandonFollowerAppendLocked(leo int64, err error) error {
	end := l.logEndOffset.Load()
	if l.failed() == nil {
		if terr := l.epochs.TruncateFromEnd(end); terr != nil {
			err = errors.Join(err, l.fail(storageError(terr, "truncate epoch cache to %d", end)))
		}
	}
	l.mu.Unlock()
	if end > leo && l.cfg.FlushPolicy == FlushEveryBatch && l.failed() == nil {
		if ferr := l.flushTo(end); ferr != nil {
			err = errors.Join(err, ferr)
		}
	}
	return err
}

// finishAppend applies the flush policy once the log lock is released, so
// that the fsync runs outside it and concurrent appenders share it.
func (l *Log) finishAppend(info AppendInfo, err error) (AppendInfo, error) {
	if err != nil {
		return AppendInfo{}, err
	}
	if l.cfg.FlushPolicy == FlushEveryBatch {
		if err := l.flushTo(info.LastOffset + 1); err != nil {
			return AppendInfo{}, err
		}
	}
	return info, nil
}

// appendLocked writes batches, consecutive slices of data starting at the
// LEO, to the active segment, rolling whenever the next batch would not fit.
// Batches that share a segment go in one write. Runs under mu.
func (l *Log) appendLocked(data []byte, batches []record.Batch) (AppendInfo, error) {
	seg := l.activeSegment()
	runStart, runBytes := 0, 0 // the batches not yet written, and their size
	written := 0               // bytes of data written
	for i, b := range batches {
		if l.shouldRoll(seg, seg.size.Load()+int64(runBytes), len(b), b.LastOffset(), b.MaxTimestamp()) {
			if err := l.writeLocked(seg, data[written:written+runBytes], batches[runStart:i]); err != nil {
				return AppendInfo{}, err
			}
			written += runBytes
			runStart, runBytes = i, 0
			var err error
			if seg, err = l.rollLocked(b.BaseOffset()); err != nil {
				return AppendInfo{}, err
			}
		}
		runBytes += len(b)
	}
	if err := l.writeLocked(seg, data[written:written+runBytes], batches[runStart:]); err != nil {
		return AppendInfo{}, err
	}
	return AppendInfo{
		FirstOffset: batches[0].BaseOffset(),
		LastOffset:  batches[len(batches)-1].LastOffset(),
		Bytes:       len(data),
	}, nil
}

// shouldRoll says whether a batch of size bytes whose last offset is
// lastOffset and max timestamp maxTimestamp must go to a new segment: the
// segment would outgrow SegmentBytes, the offset would not fit the index's
// relative offsets, or (SegmentMs) the batch is more than SegmentMs newer
// than the segment's first batch, as Kafka's roll by time measures it. An
// empty segment takes any batch, however large or late. Runs under mu.
func (l *Log) shouldRoll(seg *segment, segSize int64, size int, lastOffset, maxTimestamp int64) bool {
	if segSize == 0 {
		return false
	}
	if segSize+int64(size) > l.cfg.SegmentBytes || lastOffset-seg.baseOffset > math.MaxUint32 {
		return true
	}
	if l.cfg.SegmentMs <= 0 {
		return false
	}
	first, err := seg.rollBaseTimestamp()
	// A header that cannot be read rolls nothing by time: the size rule
	// still bounds the segment, and the read path reports the damage.
	return err == nil && first >= 0 && maxTimestamp-first > l.cfg.SegmentMs
}

// writeLocked writes one run of batches to seg and publishes it: first the
// segment's size, then the LEO, so a reader that sees the LEO finds the bytes.
func (l *Log) writeLocked(seg *segment, run []byte, batches []record.Batch) error {
	if len(batches) == 0 {
		return nil
	}
	if err := seg.write(run, batches, l.cfg.IndexIntervalBytes); err != nil {
		// A write that fails publishes nothing, and leaves nothing behind:
		// the bytes it wrote past the segment's size, and index entries
		// for them, would otherwise come back at the next recovery as
		// records never acknowledged, at offsets other records take.
		// Cutting them needs no new descriptor.
		if cerr := seg.truncate(seg.size.Load()); cerr != nil {
			return l.fail(storageError(errors.Join(err, cerr), "append, and undo it"))
		}
		return l.ioError(err, "append")
	}
	seg.size.Add(int64(len(run)))
	l.logEndOffset.Store(batches[len(batches)-1].NextOffset())
	// With the LEO: a roll's snapshot then holds exactly the batches
	// below its offset.
	l.applyProducerBatchesLocked(batches)
	return nil
}

// rollLocked starts a new active segment at baseOffset and seals the old one
// in the background: appends do not wait for an fsync of a whole segment
// (hundreds of milliseconds at 256 MiB), as Kafka schedules its flush of a
// rolled segment rather than running it inline.
//
// Until that fsync is done the recovery point stays below the old segment's
// end (only a successful sync moves it), so a crash in between makes recovery
// scan the segment rather than trust it.
func (l *Log) rollLocked(baseOffset int64) (*segment, error) {
	segs := l.segmentList()
	old := segs[len(segs)-1]
	// The producer state at the roll (every batch below baseOffset applied)
	// is serialised here, in memory; the sealer writes it once the rolled
	// segment is durable, so a snapshot never describes batches a power
	// loss can take (Kafka snapshots at every roll too).
	snap := l.takeProducerSnapshotLocked()
	seg, err := createSegment(l.fsys, l.cache, l.dir, baseOffset)
	if err != nil {
		return nil, l.ioError(err, "roll")
	}
	// The new file's directory entry must be durable before data fsynced into
	// it counts as durable. That fsync of the directory is left to the next
	// flush (syncOnce), outside mu: on ext4 it commits the journal, which in
	// ordered mode waits for every dirty page of the log, and appends must not
	// wait for that.
	l.dirDirty.Store(true)
	l.setSegments(append(segs[:len(segs):len(segs)], seg))
	l.logger.Debug().Str("dir", l.dir).Int64("base_offset", baseOffset).Msg("rolled segment")
	go l.sealInBackground(old, snap)
	return seg, nil
}

// sealInBackground makes a rolled segment durable, index included. It runs
// under syncMu, one fsync at a time with the group commit, and after Close it
// does nothing. A failed fsync fails the log: the next flush's fsync of the
// same file could report success over pages the kernel dropped (see fail).
// Running out of descriptors for the index file is only logged: the
// recovery point has not moved past the segment, and recovery rebuilds a
// missing index.
func (l *Log) sealInBackground(s *segment, snap *producerSnapshot) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	// A truncation (which takes syncMu too) may have removed the segment
	// before we got here.
	if l.closed.Load() || l.failed() != nil || !slices.Contains(l.segmentList(), s) {
		return
	}
	if err := s.seal(); err != nil {
		if err = l.ioError(err, "seal segment %d", s.baseOffset); errors.Is(err, ErrFileLimit) {
			l.logger.Warn().Err(err).Str("dir", l.dir).Int64("base_offset", s.baseOffset).Msg("seal rolled segment")
		}
		return
	}
	if snap != nil {
		l.writeProducerSnapshot(snap)
	}
}

// assignEpochLocked records that epoch starts at base, the offset of the
// batch being appended. In memory only, normally: the flush that moves the
// recovery point past the batch writes it first (syncOnce). Below
// epochFloor (right after a truncation, before the recovery point is back
// up) it is written, fsynced, at once: a crash could otherwise restart
// from a recovery point above base and never learn where the epoch began.
func (l *Log) assignEpochLocked(epoch int32, base int64) error {
	assign := l.epochs.AssignDeferred
	if base < l.epochFloor {
		assign = l.epochs.Assign
	}
	if err := assign(epoch, base); err != nil {
		return l.ioError(err, "assign epoch %d at %d", epoch, base)
	}
	return nil
}

// SetRoll changes when the active segment rolls: a topic's segment.bytes
// (0: keep) and segment.ms (0 or less: never by time), which an operator
// may change while the log is open. It applies from the next append; the
// active segment is not rolled by the change itself.
func (l *Log) SetRoll(segmentBytes, segmentMs int64) error {
	if segmentBytes < 0 || segmentBytes > math.MaxInt32 {
		return fmt.Errorf("log: segment bytes %d outside [1, %d]", segmentBytes, math.MaxInt32)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if segmentBytes > 0 {
		l.cfg.SegmentBytes = segmentBytes
	}
	l.cfg.SegmentMs = max(segmentMs, 0)
	return nil
}
