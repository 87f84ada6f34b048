package log

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/replicad/replicad/core/record"
)

// openSegments opens every segment in the directory, oldest first, and says
// which have an index that passed the sanity check. Index files without their
// log file are leftovers of a deleted segment and are removed.
func (l *Log) openSegments() (segs []*segment, indexValid []bool, err error) {
	entries, err := l.fsys.ReadDir(l.dir)
	if err != nil {
		return nil, nil, storageError(err, "read dir %s", l.dir)
	}
	logs := make(map[int64]bool)
	var bases, orphans []int64
	for _, e := range entries {
		if base, suffix, ok := parseSegmentName(e.Name()); ok && suffix == logFileSuffix {
			logs[base] = true
			bases = append(bases, base)
		}
	}
	for _, e := range entries {
		if base, suffix, ok := parseSegmentName(e.Name()); ok && suffix == indexFileSuffix && !logs[base] {
			orphans = append(orphans, base)
		}
	}
	for _, base := range orphans {
		if err := removeIfExists(l.fsys, segmentPath(l.dir, base, indexFileSuffix)); err != nil {
			return nil, nil, storageError(err, "remove orphan index %d", base)
		}
	}
	slices.Sort(bases)
	for _, base := range bases {
		s, valid, err := openSegment(l.fsys, l.cache, l.dir, base)
		if err != nil {
			closeSegments(segs)
			return nil, nil, storageError(err, "open log")
		}
		segs = append(segs, s)
		indexValid = append(indexValid, valid)
	}
	return segs, indexValid, nil
}

// recoverSegments checks the opened segments and returns the ones that form
// the log, with its end offset, and the damage found below the recovery
// point, if any.
//
// Segments below the one holding the recovery point were fsynced, so they are
// trusted; only a missing or invalid index makes one of them be re-read
// (verifying it on the way). From the segment holding the recovery point on,
// writes may not have reached the disk before a crash: every batch is read and
// must be whole, pass its CRC and continue the offsets. The first past the
// recovery point that does not is a torn tail, cut off with everything after
// it, later segments included. One below the recovery point is damage at
// rest: nothing is cut (see Damage), unless Config.TruncateDamaged.
func (l *Log) recoverSegments(segs []*segment, indexValid []bool, recoveryPoint int64) ([]*segment, int64, *Damage, error) {
	from := 0 // the segment holding the recovery point
	for from+1 < len(segs) && segs[from+1].baseOffset <= recoveryPoint {
		from++
	}
	scanner := newBatchScanner()
	for i := range from {
		if indexValid[i] {
			continue
		}
		next, cut, dmg, err := l.recoverSegment(segs[i], 0, segs[i].baseOffset, recoveryPoint, scanner)
		if err == nil && dmg == nil {
			// flushTo only syncs from the recovery point on: seal the rebuilt index now.
			err = segs[i].seal()
		}
		if err != nil {
			return nil, 0, nil, storageError(err, "recover segment %d", segs[i].baseOffset)
		}
		if dmg != nil {
			return segs, dmg.Offset, dmg, nil
		}
		if !cut && next != segs[i+1].baseOffset {
			if dmg := l.gapBelow(recoveryPoint, segs[i], next, segs[i+1].baseOffset); dmg != nil {
				return segs, next, dmg, nil
			}
		}
		if cut || next != segs[i+1].baseOffset {
			return l.dropSegmentsAfter(segs, i, next)
		}
	}

	pos, next, err := recoveryStart(segs[from], indexValid[from], recoveryPoint)
	if err != nil {
		return nil, 0, nil, storageError(err, "recover segment %d", segs[from].baseOffset)
	}
	for i := from; i < len(segs); i++ {
		s := segs[i]
		if i > from {
			if s.baseOffset != next {
				// A gap or an overlap: the previous segment lost its tail.
				if dmg := l.gapBelow(recoveryPoint, segs[i-1], next, s.baseOffset); dmg != nil {
					return segs, next, dmg, nil
				}
				return l.dropSegmentsAfter(segs, i-1, next)
			}
			pos = 0
		}
		var cut bool
		var dmg *Damage
		next, cut, dmg, err = l.recoverSegment(s, pos, next, recoveryPoint, scanner)
		if err != nil {
			return nil, 0, nil, storageError(err, "recover segment %d", s.baseOffset)
		}
		if dmg != nil {
			return segs, dmg.Offset, dmg, nil
		}
		if cut {
			return l.dropSegmentsAfter(segs, i, next)
		}
	}
	return segs, next, nil, nil
}

// gapBelow is the damage of a segment s that ends at next, below the
// recovery point, where the following one starts elsewhere (at base):
// records below the recovery point are missing or doubled. nil when next is
// not below the recovery point (a torn tail) or Config.TruncateDamaged.
func (l *Log) gapBelow(recoveryPoint int64, s *segment, next, base int64) *Damage {
	if next >= recoveryPoint || l.cfg.TruncateDamaged {
		return nil
	}
	return &Damage{Offset: next, RecoveryPoint: recoveryPoint, Cause: fmt.Errorf("%w: segment %d ends at offset %d, the next one starts at %d",
		record.ErrCorrupt, s.baseOffset, next, base), seg: s, position: s.size.Load()}
}

// recoveryStart returns where recovery of the segment holding the recovery
// point begins: the nearest indexed batch at or below the recovery point,
// once its header confirms the entry, else the segment start.
func recoveryStart(s *segment, indexValid bool, recoveryPoint int64) (pos, offset int64, err error) {
	if !indexValid {
		return 0, s.baseOffset, nil
	}
	e, ok, err := s.index.lookup(recoveryPoint)
	if err != nil || !ok {
		return 0, s.baseOffset, err
	}
	h, ok, err := s.headerAt(int64(e.position))
	if err != nil {
		return 0, 0, err
	}
	offset = s.baseOffset + int64(e.relOffset)
	if !ok || h.BaseOffset() != offset {
		return 0, s.baseOffset, nil
	}
	return int64(e.position), offset, nil
}

// dropSegmentsAfter deletes the segments after segs[last]; the log ends at
// logEndOffset inside segs[last], undamaged (recoverSegments' results).
func (l *Log) dropSegmentsAfter(segs []*segment, last int, logEndOffset int64) ([]*segment, int64, *Damage, error) {
	dropped := segs[last+1:]
	if len(dropped) > 0 {
		l.logger.Warn().Str("dir", l.dir).Int64("log_end_offset", logEndOffset).Int("segments", len(dropped)).
			Msg("deleting segments after the recovered log end")
	}
	for i := len(dropped) - 1; i >= 0; i-- {
		if err := dropped[i].remove(); err != nil {
			return nil, 0, nil, storageError(err, "delete segment %d", dropped[i].baseOffset)
		}
	}
	if len(dropped) > 0 {
		// Durable before anything new is appended: a dropped segment that
		// came back after a later power loss, below a recovery point the
		// new records moved, would be trusted in their place.
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return nil, 0, nil, storageError(err, "delete segments after %d", logEndOffset)
		}
	}
	return segs[:last+1], logEndOffset, nil, nil
}

// recoverSegment verifies the batches of s from pos, where the batch with
// offset nextOffset starts, to the end of the file, rebuilds their index
// entries and records epochs newer than the cache's latest. It returns the
// offset after the last valid batch. At the first batch that is torn, fails
// its CRC or breaks the offset sequence, the file is cut (cut true), unless
// that batch is below recoveryPoint: then nothing is cut and the damage is
// returned (see Damage), or cut all the same with Config.TruncateDamaged.
func (l *Log) recoverSegment(s *segment, pos, nextOffset, recoveryPoint int64, scanner *batchScanner) (next int64, cut bool, atRest *Damage, err error) {
	if pos == 0 {
		err = s.index.reset()
	} else {
		err = s.index.truncateBelowPosition(pos + 1)
	}
	if err != nil {
		return 0, false, nil, fmt.Errorf("reset index: %w", err)
	}
	scanner.reset(s.file, pos, s.size.Load())
	for {
		b, damage := scanner.next()
		if damage == io.EOF {
			return nextOffset, false, nil, nil
		}
		if damage == nil {
			damage = checkRecovered(s, b, nextOffset)
		}
		if damage != nil {
			if !errors.Is(damage, record.ErrCorrupt) && !errors.Is(damage, record.ErrTruncated) {
				return 0, false, nil, damage // reading failed: the disk, not the data
			}
			lg := l.logger.Warn().Str("dir", l.dir).Int64("base_offset", s.baseOffset).Int64("position", pos).
				Int64("offset", nextOffset).Int64("recovery_point", recoveryPoint).Int64("bytes", s.size.Load()-pos).Err(damage)
			if nextOffset < recoveryPoint {
				if !l.cfg.TruncateDamaged {
					lg.Msg("batch damaged below the recovery point: the log opens damaged, nothing is cut")
					return nextOffset, false, &Damage{Offset: nextOffset, RecoveryPoint: recoveryPoint, Cause: damage, seg: s, position: pos}, nil
				}
				lg.Msg("batch damaged below the recovery point: truncating it and everything after it (truncate damaged logs is on)")
			} else {
				lg.Msg("truncating torn or corrupt log tail")
			}
			// Durable before the log takes anything more: new records may
			// go to a new segment and move the recovery point past this one,
			// which a restart then trusts unread; were the cut undone by a
			// power loss, the torn bytes would be back inside the log
			// (crashtest every-batch seed 35081).
			if err := s.truncate(pos); err != nil {
				return 0, false, nil, err
			}
			if err := s.sync(); err != nil {
				return 0, false, nil, err
			}
			return nextOffset, true, nil, nil
		}
		if err := s.maybeIndex(nextOffset, pos, l.cfg.IndexIntervalBytes); err != nil {
			return 0, false, nil, err
		}
		// As Kafka's segment recovery does: an epoch checkpoint written
		// without fsync, or truncated bytes that came back after a crash,
		// can leave batches whose epoch the cache lacks, and divergence
		// checks would then compare the wrong epochs.
		if e := b.LeaderEpoch(); e >= 0 && e > l.epochs.LatestEpoch() {
			if err := l.epochs.Assign(e, b.BaseOffset()); err != nil {
				return 0, false, nil, err
			}
		}
		pos += int64(len(b))
		nextOffset = b.NextOffset()
	}
}

// checkRecovered says why b cannot be the batch at nextOffset in s.
func checkRecovered(s *segment, b record.Batch, nextOffset int64) error {
	if err := b.Verify(); err != nil {
		return err
	}
	if b.BaseOffset() != nextOffset {
		return fmt.Errorf("%w: base offset %d, expected %d", record.ErrCorrupt, b.BaseOffset(), nextOffset)
	}
	if b.LastOffset()-s.baseOffset > math.MaxUint32 {
		return fmt.Errorf("%w: offset %d too far from segment base", record.ErrCorrupt, b.LastOffset())
	}
	return nil
}

// batchScanner reads a segment's batches in order during recovery. Its buffers
// live only while the log opens.
type batchScanner struct {
	r         *bufio.Reader
	remaining int64
	buf       []byte
}

func newBatchScanner() *batchScanner {
	return &batchScanner{r: bufio.NewReaderSize(nil, 64<<10)}
}

func (sc *batchScanner) reset(f io.ReaderAt, from, to int64) {
	sc.r.Reset(io.NewSectionReader(f, from, to-from))
	sc.remaining = to - from
}

// next returns the next whole batch (unverified), io.EOF at a clean end,
// record.ErrTruncated when the file ends inside a batch, record.ErrCorrupt for
// an impossible length, or a read error.
func (sc *batchScanner) next() (record.Batch, error) {
	if sc.remaining == 0 {
		return nil, io.EOF
	}
	if sc.remaining < record.LogOverhead {
		return nil, record.ErrTruncated
	}
	var header [record.LogOverhead]byte
	if _, err := io.ReadFull(sc.r, header[:]); err != nil {
		return nil, err
	}
	size, err := record.Size(header[:])
	if err != nil {
		return nil, err
	}
	if int64(size) > sc.remaining {
		// Checked before allocating: a torn length field can claim 64 MiB.
		return nil, record.ErrTruncated
	}
	if cap(sc.buf) < size {
		sc.buf = make([]byte, size)
	}
	b := sc.buf[:size]
	copy(b, header[:])
	if _, err := io.ReadFull(sc.r, b[record.LogOverhead:]); err != nil {
		return nil, err
	}
	sc.remaining -= int64(size)
	return b, nil
}

func closeSegments(segs []*segment) {
	for _, s := range segs {
		_ = s.close()
	}
}
