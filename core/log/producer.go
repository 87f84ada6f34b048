package log

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/replicad/replicad/core/log/producerstate"
	"github.com/replicad/replicad/core/record"
)

// Errors of a leader's append of an idempotent producer's batch (see
// producerstate): nothing was appended.
var (
	// ErrOutOfOrderSequence: the batch's base sequence does not follow
	// the producer's last (a gap), or a new epoch does not start at 0.
	ErrOutOfOrderSequence = producerstate.ErrOutOfOrderSequence
	// ErrInvalidProducerEpoch: the batch's epoch is older than the
	// producer's here: a newer instance fenced it.
	ErrInvalidProducerEpoch = producerstate.ErrInvalidEpoch
	// ErrUnknownProducerID: no state for the producer here (never seen,
	// expired, evicted, truncated or deleted away), and the batch does not
	// start at sequence 0.
	ErrUnknownProducerID = producerstate.ErrUnknownProducer
)

// snapshotsKept is how many producer-state snapshots a log keeps: more than
// one, so that a truncation below the newest (a follower's divergence cuts
// the tail) still reloads from one instead of replaying from the log start.
const snapshotsKept = 3

// ProducerInfo is one producer's state as described to operators.
type ProducerInfo = producerstate.Info

// ProducerRebuild describes a rebuild of the producer state from the
// remaining log after a truncation (Options.OnProducerStateRebuilt).
type ProducerRebuild struct {
	// Reason: "truncate" (to an offset), "truncate fully", "open".
	Reason string
	// EndOffset is the log end the state was rebuilt to.
	EndOffset int64
	// SnapshotOffset is the snapshot it was loaded from, -1 for none (the
	// log start).
	SnapshotOffset int64
	// Batches counts the producer batches replayed after the snapshot.
	Batches int
	// Before and After count the producers held before and after.
	Before, After int
}

// producerSnapshot is a snapshot taken at a roll, for the background
// sealer to write once the rolled segment is durable.
type producerSnapshot struct {
	offset int64
	data   []byte
	gen    uint64 // producerGen when taken: a rebuild since voids it
}

// applyProducerBatchesLocked records the v1 batches just written (the
// leader's, validated before; a follower's, as they come). Under mu.
func (l *Log) applyProducerBatchesLocked(batches []record.Batch) {
	changed := false
	for _, b := range batches {
		if b.HasProducer() {
			l.producers.ApplyBatch(b)
			changed = true
		}
	}
	if changed {
		l.producerCount.Store(int64(l.producers.Len()))
	}
}

// checkProducerLocked validates a leader's batch b against the producer
// state. A duplicate returns the original batch's offsets, Duplicate set.
func (l *Log) checkProducerLocked(b record.Batch) (AppendInfo, bool, error) {
	if !b.HasProducer() {
		return AppendInfo{}, false, nil
	}
	p := b.Producer()
	res, err := l.producers.Check(p, b.LastSequence())
	if err != nil {
		return AppendInfo{}, false, fmt.Errorf("append as leader: %w", err)
	}
	if res.Duplicate {
		return AppendInfo{FirstOffset: res.Original.FirstOffset, LastOffset: res.Original.LastOffset, Duplicate: true}, true, nil
	}
	return AppendInfo{Fenced: res.Fenced, FencedEpoch: res.FencedEpoch}, false, nil
}

// ProducerCount is the number of producers the log holds state for.
func (l *Log) ProducerCount() int { return int(l.producerCount.Load()) }

// Producers returns the count of producers held and up to limit of them
// (limit <= 0: all), the last appended first.
func (l *Log) Producers(limit int) (int, []ProducerInfo) {
	// Copied under the lock, sorted outside it: appends wait for the
	// copy only.
	l.mu.Lock()
	infos := l.producers.Infos()
	l.mu.Unlock()
	return len(infos), producerstate.SortInfos(infos, limit)
}

// ProducerState returns a copy of the producer state (tests).
func (l *Log) ProducerState() *producerstate.Manager {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.Clone()
}

// RemoveExpiredProducers drops the producers whose last batch's max
// timestamp is Config.ProducerIDExpirationMs or more before nowMs (Kafka's
// producer.id.expiration.ms), and returns their IDs. The owner calls it
// periodically.
func (l *Log) RemoveExpiredProducers(nowMs int64) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() || l.cfg.ProducerIDExpirationMs <= 0 {
		return nil
	}
	gone := l.producers.Expire(nowMs, l.cfg.ProducerIDExpirationMs)
	if len(gone) > 0 {
		l.producerCount.Store(int64(l.producers.Len()))
	}
	return gone
}

// rebuildProducerStateLocked rebuilds the producer state to the log end,
// from the newest sound snapshot in [log start, LEO] and the batches after
// it (Kafka's UnifiedLog.rebuildProducerState). Snapshots above the log end
// (a truncation, or a power loss, took the log below them) are deleted,
// durably before anything is appended over their offsets: one that came
// back would describe batches the log no longer has. A damaged snapshot is
// deleted and an older one tried. Under mu (or in Open).
func (l *Log) rebuildProducerStateLocked(reason string) error {
	end, start := l.logEndOffset.Load(), l.logStartOffset.Load()
	before := l.producers.Len()
	offsets, leftovers, err := producerstate.Snapshots(l.fsys, l.dir)
	if err != nil {
		return fmt.Errorf("list producer snapshots: %w", err)
	}
	removed := false
	for _, p := range leftovers {
		if err := removeIfExists(l.fsys, p); err != nil {
			return err
		}
	}
	var m *producerstate.Manager
	from, snap := start, int64(-1)
	for i := len(offsets) - 1; i >= 0 && m == nil; i-- {
		off := offsets[i]
		if off < start {
			break
		}
		path := producerstate.SnapshotPath(l.dir, off)
		if off <= end {
			data, err := l.fsys.ReadFile(path)
			if err == nil {
				m, err = producerstate.Decode(data, off, l.cfg.MaxProducers)
			}
			if err == nil {
				from, snap = off, off
				break
			}
			if !errors.Is(err, producerstate.ErrBadSnapshot) && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("read producer snapshot %d: %w", off, err)
			}
			l.logger.Warn().Err(err).Str("dir", l.dir).Int64("offset", off).
				Msg("producer state snapshot damaged: deleting it, rebuilding from an older one or the log")
		}
		if err := removeIfExists(l.fsys, path); err != nil {
			return err
		}
		removed = true
	}
	if removed {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return fmt.Errorf("delete producer snapshots above %d: %w", end, err)
		}
	}
	if m == nil {
		m = producerstate.NewManager(l.cfg.MaxProducers)
	}
	m.TruncateHead(start)
	n := 0
	err = l.scanBatchHeaders(from, end, func(h record.Batch) {
		if h.HasProducer() {
			m.ApplyBatch(h)
			n++
		}
	})
	if errors.Is(err, record.ErrCorrupt) {
		// Damage at rest the recovery did not read (below the recovery
		// point): the reads report it; the state is what precedes it.
		l.logger.Error().Err(err).Str("dir", l.dir).Msg("producer state rebuilt only up to a damaged batch")
		err = nil
	}
	if err != nil {
		return err
	}
	l.producers = m
	l.producerGen++
	l.lastSnapshot = snap
	l.logger.Debug().Str("dir", l.dir).Str("reason", reason).Int64("log_end_offset", end).Int64("snapshot_offset", snap).
		Int("batches", n).Int("producers", m.Len()).Msg("producer state rebuilt")
	l.producerCount.Store(int64(m.Len()))
	if l.onProducerStateRebuilt != nil && reason != "" {
		l.onProducerStateRebuilt(ProducerRebuild{Reason: reason, EndOffset: end, SnapshotOffset: snap, Batches: n, Before: before, After: m.Len()})
	}
	return nil
}

// scanBatchHeaders calls fn with the header (up to the producer fields) of
// every batch in [from, end), in order. The batches were verified by
// recovery or on append. It reads the segments in chunks and hops from
// header to header, so the records of a batch larger than a chunk are
// never read.
func (l *Log) scanBatchHeaders(from, end int64, fn func(record.Batch)) error {
	if from >= end {
		return nil
	}
	const v1Header = record.HeaderSize + record.ProducerFieldsSize
	chunk := make([]byte, 64<<10)
	segs := l.segmentList()
	for i := segmentIndex(segs, from); i < len(segs); i++ {
		s := segs[i]
		if s.baseOffset >= end {
			return nil
		}
		pos := int64(0)
		if s.baseOffset < from {
			var err error
			if pos, err = s.startFor(from); err != nil {
				return err
			}
		}
		size := s.size.Load()
		var buf []byte // the file from bufStart
		var bufStart int64
		// header returns the n bytes at pos, reading a chunk when the
		// buffer does not hold them.
		header := func(n int) (record.Batch, error) {
			if pos < bufStart || pos+int64(n) > bufStart+int64(len(buf)) {
				k := min(int64(len(chunk)), size-pos)
				if _, err := s.file.ReadAt(chunk[:k], pos); err != nil {
					return nil, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
				}
				buf, bufStart = chunk[:k], pos
			}
			return record.Batch(buf[pos-bufStart : pos-bufStart+int64(n)]), nil
		}
		for pos < size {
			if size-pos < record.HeaderSize {
				return fmt.Errorf("%w: segment %d: partial header at %d", record.ErrCorrupt, s.baseOffset, pos)
			}
			// The v0 header first: a plain batch may be shorter than a
			// v1 header.
			h, err := header(record.HeaderSize)
			if err != nil {
				return err
			}
			bsize, serr := record.Size(h)
			if serr == nil && h.HasProducer() {
				if bsize < v1Header || pos+v1Header > size {
					serr = record.ErrCorrupt
				} else if h, err = header(v1Header); err != nil {
					return err
				}
			}
			if serr != nil || bsize < len(h) || pos+int64(bsize) > size {
				return fmt.Errorf("%w: segment %d: bad batch at %d", record.ErrCorrupt, s.baseOffset, pos)
			}
			if h.BaseOffset() >= end || h.LastOffset() >= end {
				// The log ends here (a damaged log's segment holds bytes
				// past its end).
				return nil
			}
			if h.LastOffset() >= from {
				fn(h)
			}
			pos += int64(bsize)
		}
	}
	return nil
}

// takeProducerSnapshotLocked serialises the state at the log end, for a
// roll's background sealer to write. Under mu.
func (l *Log) takeProducerSnapshotLocked() *producerSnapshot {
	off := l.logEndOffset.Load()
	return &producerSnapshot{offset: off, data: l.producers.Encode(off), gen: l.producerGen}
}

// writeProducerSnapshot writes snap unless a rebuild voided it, and deletes
// the snapshots no longer needed. Under syncMu, not mu: no truncation runs
// meanwhile (each takes syncMu), appends do. A failure is logged, not
// fatal: the state is always rebuildable from the log.
func (l *Log) writeProducerSnapshot(snap *producerSnapshot) {
	l.mu.Lock()
	ok := l.producerGen == snap.gen && snap.offset <= l.logEndOffset.Load() && snap.offset >= l.logStartOffset.Load()
	l.mu.Unlock()
	if !ok {
		return
	}
	if err := producerstate.WriteSnapshot(l.fsys, l.dir, snap.offset, snap.data); err != nil {
		l.logger.Warn().Err(err).Str("dir", l.dir).Int64("offset", snap.offset).Msg("producer state snapshot not written: a restart rebuilds it from the log")
		return
	}
	l.mu.Lock()
	if l.producerGen == snap.gen {
		l.lastSnapshot = max(l.lastSnapshot, snap.offset)
	}
	l.mu.Unlock()
	l.cleanProducerSnapshots()
}

// closeSnapshotMinBytes: Close writes a snapshot only when the log holds
// at least this many bytes past the newest snapshot, the headers the next
// Open would otherwise read. A broker closing thousands of idle logs
// writes no file for them (a variable for tests).
var closeSnapshotMinBytes int64 = 1 << 20

// snapshotAtCloseLocked writes the state at the log end, its segments
// durable, unless the replay it saves is small. Unsynced: the broker's
// shutdown syncs each log dir once after closing its logs (a snapshot
// lost to a power loss before that only costs a replay). Under mu, at
// Close. Not fatal: the state is always rebuildable from the log.
func (l *Log) snapshotAtCloseLocked() {
	end := l.logEndOffset.Load()
	if l.damage.Load() != nil || end == l.lastSnapshot {
		return
	}
	segs := l.segmentList()
	from := 0
	if l.lastSnapshot >= l.logStartOffset.Load() {
		from = segmentIndex(segs, l.lastSnapshot)
	}
	var pending int64
	for _, s := range segs[from:] {
		pending += s.size.Load()
	}
	if pending < closeSnapshotMinBytes {
		return
	}
	if err := producerstate.WriteSnapshotUnsynced(l.fsys, l.dir, end, l.producers.Encode(end)); err != nil {
		l.logger.Warn().Err(err).Str("dir", l.dir).Msg("producer state snapshot not written at close: the next open rebuilds it from the log")
		return
	}
	l.lastSnapshot = end
	l.cleanProducerSnapshots()
}

// cleanProducerSnapshots deletes the snapshots below the log start and all
// but the newest snapshotsKept. No fsync: one that comes back is below the
// log start (ignored) or older than those kept (still sound).
func (l *Log) cleanProducerSnapshots() {
	offsets, _, err := producerstate.Snapshots(l.fsys, l.dir)
	if err != nil {
		return
	}
	start := l.logStartOffset.Load()
	for i, off := range offsets {
		if off < start || i < len(offsets)-snapshotsKept {
			if err := removeIfExists(l.fsys, producerstate.SnapshotPath(l.dir, off)); err != nil {
				l.logger.Warn().Err(err).Str("dir", l.dir).Int64("offset", off).Msg("delete old producer state snapshot")
			}
		}
	}
}

// removeProducerSnapshots deletes every snapshot (a full truncation); the
// caller fsyncs the directory.
func (l *Log) removeProducerSnapshots() error {
	l.lastSnapshot = -1
	offsets, leftovers, err := producerstate.Snapshots(l.fsys, l.dir)
	if err != nil {
		return err
	}
	for _, off := range offsets {
		leftovers = append(leftovers, producerstate.SnapshotPath(l.dir, off))
	}
	for _, p := range leftovers {
		if err := removeIfExists(l.fsys, p); err != nil {
			return err
		}
	}
	return nil
}
