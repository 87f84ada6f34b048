package log

import (
	"errors"
	"fmt"

	"github.com/replicad/replicad/core/record"
)

// TruncateTo drops everything at or after offset, trimming the epoch cache
// and clamping HW and recovery point. When offset >= LEO no record goes, but
// epoch entries starting at or after the LEO still do (see below).
//
// Batches are kept or dropped whole: when offset falls inside a batch, that
// batch goes too and the LEO becomes its base offset, so the LEO always
// matches the data (Kafka cuts at the same batch but sets the LEO to offset).
// An offset below the log start empties the log and restarts it at offset.
//
// A truncation that lowers the recovery point has the owner checkpoint the
// lowered one before it cuts anything (Options.OnRecoveryPointLowered):
// Kafka's LogManager.truncateTo checkpoints after the truncation, which
// lets a power loss in between leave torn pages, or unflushed records
// appended since, below a recovery point still on disk.
func (l *Log) TruncateTo(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("log: truncate to negative offset %d", offset)
	}
	// syncMu first: a rolled segment may be being sealed in the background,
	// and truncation may close or rewrite it.
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	// A damaged log is cut at its damage first: whatever the truncation
	// keeps must be what the log serves.
	if err := l.repairLocked(); err != nil {
		return err
	}
	if leo := l.logEndOffset.Load(); offset >= leo {
		// Always trim the epoch cache, as Kafka's UnifiedLog.truncateTo
		// does: a broker that led an epoch and appended nothing in it holds
		// an entry starting at its LEO. As a follower that entry would be its
		// last fetched epoch, the leader would answer the same diverging
		// epoch forever, and the truncation it asks for would change nothing.
		if err := l.epochs.TruncateFromEnd(leo); err != nil {
			return l.fail(storageError(err, "truncate epoch cache to %d", leo))
		}
		return nil
	}
	if offset < l.logStartOffset.Load() {
		return l.truncateFullyLocked(offset)
	}
	// A failure here fails the log, out of descriptors included, unless it
	// came before anything was cut (the cut point unreadable, the
	// checkpoint before the cut not opened): the segments may be cut
	// partway, and the epoch cache may be ahead of them. The offsets always
	// follow what is left (truncateSegmentsLocked).
	logEndOffset, err := l.truncateSegmentsLocked(offset)
	if errors.Is(err, record.ErrCorrupt) {
		// Where to cut could not be read past a damaged batch, and nothing
		// was changed: damage is the partition's to handle, not a failing
		// disk's.
		return fmt.Errorf("log: truncate to %d: %w", offset, err)
	}
	if errors.Is(err, ErrFileLimit) {
		return err // the checkpoint before the cut could not be opened
	}
	if err != nil {
		return l.fail(storageError(err, "truncate to %d", offset))
	}
	if err := l.epochs.TruncateFromEnd(logEndOffset); err != nil {
		return l.fail(storageError(err, "truncate epoch cache to %d", logEndOffset))
	}
	// What the remaining log says, before anything is appended after it:
	// a producer's batches cut away must not answer a retry as duplicate.
	if err := l.rebuildProducerStateLocked("truncate"); err != nil {
		return l.fail(storageError(err, "rebuild producer state at %d", logEndOffset))
	}
	l.logger.Info().Str("dir", l.dir).Int64("offset", offset).Int64("log_end_offset", logEndOffset).
		Msg("truncated log")
	return nil
}

// truncateSegmentsLocked cuts the segments before the batch holding offset
// and moves the offsets down; it returns the new LEO. Readers retry around
// it (see Read), so it does no more than that. An error before anything was
// cut is record.ErrCorrupt (the cut point could not be read) or, from the
// checkpoint before the cut, ErrFileLimit.
func (l *Log) truncateSegmentsLocked(offset int64) (int64, error) {
	segs := l.segmentList()
	keep := segmentIndex(segs, offset)
	pos, end, err := segs[keep].cutPoint(offset)
	if err != nil {
		return 0, err
	}
	return end, l.cutLocked(segs, keep, pos, end)
}

// cutLocked removes the segments after segs[k], newest first, and cuts
// segs[k] at position, where the batch at end starts; the log then ends at
// end. The lowered recovery point is checkpointed first, and each step is
// durable before the next: a power loss keeping a cut but not the removals
// before it would leave a gap in the log, and one that undid the cut would
// bring back batches whose epochs the durable cache (trimmed next) no
// longer has, where recovery trusts the cache.
//
// When a step fails the log still ends where its segments do: a removal
// that fails leaves the segments before the one it failed on, and the LEO
// at that one's base offset (or lower, a damaged log's); a cut that fails
// leaves the segments kept, uncut: truncate publishes the new size only
// once the file is cut. The caller fails the log.
func (l *Log) cutLocked(segs []*segment, k int, position, end int64) error {
	if err := l.lowerRecoveryPointDurablyLocked(end); err != nil {
		return err
	}
	l.beginTruncation()
	defer l.endTruncation()
	for i := len(segs) - 1; i > k; i-- {
		if err := segs[i].remove(); err != nil {
			l.endAtLocked(segs[:i], min(l.logEndOffset.Load(), segs[i].baseOffset))
			return fmt.Errorf("delete segment %d: %w", segs[i].baseOffset, err)
		}
	}
	if k+1 < len(segs) {
		l.endAtLocked(segs[:k+1], min(l.logEndOffset.Load(), segs[k+1].baseOffset))
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return err
		}
	}
	if err := segs[k].truncate(position); err != nil {
		return err
	}
	l.endAtLocked(segs[:k+1], end)
	return segs[k].sync()
}

// lowerRecoveryPointDurablyLocked lowers the recovery point to end before a
// truncation cuts below it, and has the owner make that durable
// (Options.OnRecoveryPointLowered) before anything is cut. A cut that a
// power loss interrupts can leave the page it cut torn or zeroed under the
// file's old size; below a recovery point still on disk, recovery would
// take that for damage at rest (see Damaged), and trust the bytes below it
// unread. Kafka checkpoints after the truncation, as this log's owner did,
// which leaves that window open.
func (l *Log) lowerRecoveryPointDurablyLocked(end int64) error {
	if l.recoveryPoint.Load() <= end {
		return nil
	}
	l.lowerRecoveryPointLocked(end)
	return l.checkpointOffsetsLocked()
}

// checkpointOffsetsLocked has the owner checkpoint the log's recovery point
// and log start (Options.OnRecoveryPointLowered). The owner's checkpoint
// then holds no recovery point above the log's: epochFloor has done its
// work.
func (l *Log) checkpointOffsetsLocked() error {
	if l.onRecoveryPointLowered == nil {
		return nil
	}
	if err := l.onRecoveryPointLowered(); err != nil {
		if outOfDescriptors(err) {
			return fmt.Errorf("%w: checkpoint the recovery point lowered to %d: %w", ErrFileLimit, l.recoveryPoint.Load(), err)
		}
		return fmt.Errorf("checkpoint the recovery point lowered to %d: %w", l.recoveryPoint.Load(), err)
	}
	l.epochFloor = 0
	return nil
}

// endAtLocked makes segs, which end at end, the log's segments, with the
// offsets following them down: LEO, recovery point, HW.
func (l *Log) endAtLocked(segs []*segment, end int64) {
	l.setSegments(segs)
	l.logEndOffset.Store(end)
	l.lowerRecoveryPointLocked(end)
	l.clampHighWatermark()
}

// cutPoint is where a truncation to offset cuts the segment: the position
// and base offset of the batch holding offset (or the first after it).
func (s *segment) cutPoint(offset int64) (position, baseOffset int64, err error) {
	pos, err := s.startFor(offset)
	if err != nil {
		return 0, 0, err
	}
	loc, found, err := s.locate(offset, pos, s.size.Load())
	if err != nil {
		return 0, 0, err
	}
	if !found {
		return 0, 0, fmt.Errorf("segment %d holds no batch at or after %d", s.baseOffset, offset)
	}
	return loc.position, loc.baseOffset, nil
}

// TruncateFullyAndStartAt deletes every segment and restarts the log empty at offset.
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("log: restart at negative offset %d", offset)
	}
	// syncMu first: a rolled segment may be being sealed in the background,
	// and truncation may close or rewrite it.
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	return l.truncateFullyLocked(offset)
}

// truncateFullyLocked deletes every segment and starts an empty one at
// offset, which becomes every offset of the log. Runs under mu (or in Open).
// Any failure fails the log (see truncateSegmentsLocked).
func (l *Log) truncateFullyLocked(offset int64) error {
	if err := l.replaceSegmentsLocked(offset); err != nil {
		return l.fail(storageError(err, "truncate fully"))
	}
	before := l.producers.Len()
	l.producers.Clear()
	l.producerGen++
	l.producerCount.Store(0)
	if err := l.removeProducerSnapshots(); err != nil {
		return l.fail(storageError(err, "truncate fully: delete producer snapshots"))
	}
	if l.onProducerStateRebuilt != nil && before > 0 {
		l.onProducerStateRebuilt(ProducerRebuild{Reason: "truncate fully", EndOffset: offset, SnapshotOffset: -1, Before: before})
	}
	// The old segments (and snapshots) must not come back after a crash next to the new one.
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return l.fail(storageError(err, "truncate fully"))
	}
	if err := l.epochs.Clear(); err != nil {
		return l.fail(storageError(err, "clear epoch cache"))
	}
	// Before anything is appended at the new offsets, the owner's
	// checkpoints say where the log now starts and what of it is durable.
	if err := l.checkpointOffsetsLocked(); err != nil {
		return l.fail(storageError(err, "checkpoint the log restarted at %d", offset))
	}
	l.logger.Info().Str("dir", l.dir).Int64("offset", offset).Msg("truncated log fully")
	return nil
}

// replaceSegmentsLocked swaps every segment for an empty one at offset and
// sets every offset of the log to it, inside the readers' retry bracket.
func (l *Log) replaceSegmentsLocked(offset int64) error {
	l.beginTruncation()
	defer l.endTruncation()
	segs := l.segmentList()
	for i := len(segs) - 1; i >= 0; i-- {
		if err := segs[i].remove(); err != nil {
			l.emptiedLocked(segs[:max(i, 1)], segs[i].baseOffset, i == 0)
			return fmt.Errorf("delete segment %d: %w", segs[i].baseOffset, err)
		}
	}
	seg, err := createSegment(l.fsys, l.cache, l.dir, offset)
	if err != nil {
		l.emptiedLocked(segs[:1], offset, true)
		return err
	}
	l.setSegments([]*segment{seg})
	l.damage.Store(nil) // gone with every segment
	l.logEndOffset.Store(offset)
	l.logStartOffset.Store(offset)
	l.lowerRecoveryPointLocked(offset)
	l.recoveryPoint.Store(offset)
	l.hwMu.Lock()
	l.highWatermark.Store(offset)
	l.hwMu.Unlock()
	return nil
}

// emptiedLocked is where a full truncation that failed leaves the log:
// ending at end with segs, the segments not removed. With none left
// (empty), segs is the oldest, closed and unreadable, kept only because the
// list is never empty: the log is empty then (log start = LEO = end), so no
// read reaches it. The caller fails the log.
func (l *Log) emptiedLocked(segs []*segment, end int64, empty bool) {
	if empty {
		l.logStartOffset.Store(end)
	} else {
		l.logStartOffset.Store(min(l.logStartOffset.Load(), end))
	}
	l.endAtLocked(segs, end)
}

// beginTruncation and endTruncation bracket changes to bytes that readers
// may be reading; see Read.
func (l *Log) beginTruncation() { l.truncations.Add(1) }
func (l *Log) endTruncation()   { l.truncations.Add(1) }

// lowerRecoveryPointLocked moves the recovery point down to offset (a
// truncation), remembering the one it had as epochFloor.
func (l *Log) lowerRecoveryPointLocked(offset int64) {
	if rp := l.recoveryPoint.Load(); rp > offset {
		l.epochFloor = max(l.epochFloor, rp)
		l.recoveryPoint.Store(offset)
	}
}
