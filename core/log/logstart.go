package log

import (
	"fmt"
)

// IncrementLogStartOffset raises the log start offset to offset (Kafka's
// UnifiedLog.maybeIncrementLogStartOffset): from then on a read below it is
// ErrOffsetOutOfRange, and the segments holding only records below it are
// deleted. An offset at or below the log start changes nothing but the
// deletion of such segments (left by a crash between the checkpoint and the
// deletion). offset above the HW is refused: only committed records are
// ever deleted. It reports whether the log start moved.
//
// The raised log start is made durable (Options.OnRecoveryPointLowered, the
// owner's checkpoint) before any segment is deleted: a crash in between
// leaves segments below the log start, which a read never reaches and the
// next call deletes. The other way round, a crash would bring the log start
// back below records that are gone.
func (l *Log) IncrementLogStartOffset(offset int64) (bool, error) {
	raised, n, gen, err := l.raiseLogStart(offset)
	if err != nil {
		return false, err
	}
	// Durable before anything below it is removed, the epochs included: a
	// retry after a failed checkpoint (raised false then) checkpoints again.
	// No lock of the log is held meanwhile: the checkpoint fsyncs, and an
	// append (whose fsync waits on syncMu) must not wait for it.
	if (raised || n > 0) && l.onRecoveryPointLowered != nil {
		if err := l.onRecoveryPointLowered(); err != nil {
			// The segments stay; the log start stays raised in memory
			// (reads below it are refused), and the next checkpoint or
			// call makes it durable.
			return raised, fmt.Errorf("log: checkpoint log start %d: %w", l.logStartOffset.Load(), err)
		}
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return raised, err
	}
	if l.truncations.Load() != gen {
		// A truncation (or another raise) rewrote the log meanwhile: what
		// this call would trim may not be below its log start any more.
		// What is left below it goes at the next call, or the next open.
		return raised, nil
	}
	if raised {
		// The epochs of the records gone go with them; the entry covering
		// the new start keeps its epoch.
		if err := l.epochs.TruncateFromStart(offset); err != nil {
			return true, l.fail(storageError(err, "truncate epoch cache from %d", offset))
		}
		l.logger.Info().Str("dir", l.dir).Int64("log_start_offset", offset).Msg("raised log start offset")
	}
	if err := l.deleteSegmentsBelowStartLocked(l.segmentsBelowStartLocked()); err != nil {
		return raised, l.fail(err)
	}
	if raised {
		l.cleanProducerSnapshots()
	}
	return raised, nil
}

// raiseLogStart is IncrementLogStartOffset's first step, under mu: it
// checks offset, raises the log start in memory (reads below it are
// refused from now on), and returns how many segments are below it and the
// truncation generation it saw.
func (l *Log) raiseLogStart(offset int64) (raised bool, n int, gen uint64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return false, 0, 0, err
	}
	if d := l.damage.Load(); d != nil {
		// Its segments are the evidence a repair needs (see Damaged).
		return false, 0, 0, fmt.Errorf("%w: raise log start to %d", ErrDamaged, offset)
	}
	if hw := l.HighWatermark(); offset > hw {
		return false, 0, 0, fmt.Errorf("%w: log start %d above the high watermark %d", ErrOffsetOutOfRange, offset, hw)
	}
	raised = offset > l.logStartOffset.Load()
	if raised {
		l.logStartOffset.Store(offset)
		// Producers whose batches are all below it are gone with them.
		l.producers.TruncateHead(offset)
		l.producerCount.Store(int64(l.producers.Len()))
	}
	return raised, l.segmentsBelowStartLocked(), l.truncations.Load(), nil
}

// segmentsBelowStartLocked counts the oldest segments whose records are all
// below the log start: those followed by a segment starting at or below it.
// The active segment always stays.
func (l *Log) segmentsBelowStartLocked() int {
	segs := l.segmentList()
	start := l.logStartOffset.Load()
	n := 0
	for n < len(segs)-1 && segs[n+1].baseOffset <= start {
		n++
	}
	return n
}

// deleteSegmentsBelowStartLocked deletes the n oldest segments
// (segmentsBelowStartLocked).
func (l *Log) deleteSegmentsBelowStartLocked(n int) error {
	if n == 0 {
		return nil
	}
	segs := l.segmentList()
	// Readers take the segment list without a lock: they retry a read that
	// overlapped the change (see Read).
	l.beginTruncation()
	l.setSegments(segs[n:])
	l.endTruncation()
	for _, s := range segs[:n] {
		if err := s.remove(); err != nil {
			return storageError(err, "delete segment %d below log start %d", s.baseOffset, l.logStartOffset.Load())
		}
	}
	l.segmentsDeleted.Add(int64(n))
	l.logger.Info().Str("dir", l.dir).Int64("log_start_offset", l.logStartOffset.Load()).Int("segments", n).
		Msg("deleted segments below log start")
	return nil
}

// SegmentsDeleted counts the segments deleted below the log start
// (retention, DeleteRecords, a follower following its leader's log start)
// since the log was opened (metrics).
func (l *Log) SegmentsDeleted() int64 { return l.segmentsDeleted.Load() }

// SegmentCount is the number of segments (tests and metrics).
func (l *Log) SegmentCount() int { return len(l.segmentList()) }

// Retention is how much of a log is kept (Kafka's retention.ms and
// retention.bytes); a negative field keeps everything by that measure.
type Retention struct {
	// Ms: a segment whose newest record (the largest batch max timestamp)
	// is older than this, in ms, goes.
	Ms int64
	// Bytes: the oldest segments go while the log without them still
	// holds at least this many bytes.
	Bytes int64
}

// Reasons a RetentionPlan gives for what it deletes: the limit that put
// each segment past retention (Kafka's deleteRetentionMsBreachedSegments,
// deleteRetentionSizeBreachedSegments, deleteLogStartOffsetBreachedSegments).
const (
	ReasonRetentionMs    = "retention.ms"
	ReasonRetentionBytes = "retention.bytes"
	// ReasonLogStartOffset: segments wholly below a log start raised
	// earlier (DeleteRecords, a follower following its leader) and not
	// yet deleted (a crash, or a truncation racing the raise).
	ReasonLogStartOffset = "log-start-offset"
)

// RetentionPlan is what retention would delete from a log now.
type RetentionPlan struct {
	// Start is where the log start would move: the base offset of the
	// first segment kept (the current log start when nothing is due).
	Start int64
	// Segments and Bytes are the segments that would go, those wholly
	// below Start, and their size.
	Segments int
	Bytes    int64
	// Reasons are the limits that put them past retention, oldest
	// segment's first, each once.
	Reasons []string
}

// Due reports whether the plan deletes anything.
func (p RetentionPlan) Due() bool { return p.Segments > 0 }

// RetentionStart is PlanRetention's Start.
func (l *Log) RetentionStart(nowMs int64, r Retention) (int64, error) {
	p, err := l.PlanRetention(nowMs, r)
	return p.Start, err
}

// PlanRetention is where retention would move the log start (Kafka's
// UnifiedLog.deleteOldSegments, by time and by size): the base offset of
// the first segment kept, when the oldest segments are all past retention
// by nowMs. Never the active segment, and never past the HW: a segment
// goes only when the next one starts at or below the HW, so only committed
// records are deleted. Segments already wholly below the log start always
// go, and count for no limit. It reads no lock, and the first look at a
// segment opened from disk reads its batch headers; the caller raises the
// log start to Start with IncrementLogStartOffset, which deletes them.
func (l *Log) PlanRetention(nowMs int64, r Retention) (RetentionPlan, error) {
	start := l.logStartOffset.Load()
	plan := RetentionPlan{Start: start}
	segs := l.segmentList()
	hw := l.HighWatermark()
	i := 0
	for ; i < len(segs)-1 && segs[i+1].baseOffset <= start; i++ {
		plan.Segments++
		plan.Bytes += segs[i].size.Load()
		plan.Reasons = addReason(plan.Reasons, ReasonLogStartOffset)
	}
	if r.Ms < 0 && r.Bytes < 0 {
		return plan, nil
	}
	var size int64
	for _, s := range segs[i:] {
		size += s.size.Load()
	}
	for ; i < len(segs)-1; i++ {
		s := segs[i]
		next := segs[i+1].baseOffset
		if next > hw {
			break
		}
		why := ""
		if r.Ms >= 0 {
			ts, err := s.largestTimestamp()
			if err != nil {
				return plan, err
			}
			if ts >= 0 && ts < nowMs-r.Ms {
				why = ReasonRetentionMs
			}
		}
		if why == "" && r.Bytes >= 0 && size-s.size.Load() >= r.Bytes {
			why = ReasonRetentionBytes
		}
		if why == "" {
			break
		}
		size -= s.size.Load()
		plan.Start = max(plan.Start, next)
		plan.Segments++
		plan.Bytes += s.size.Load()
		plan.Reasons = addReason(plan.Reasons, why)
	}
	return plan, nil
}

// addReason appends why to reasons unless it is already the last one.
func addReason(reasons []string, why string) []string {
	if len(reasons) == 0 || reasons[len(reasons)-1] != why {
		return append(reasons, why)
	}
	return reasons
}
