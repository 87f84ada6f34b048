package log

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/epoch"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// Errors. IO failures are wrapped in ErrStorage so the caller can take the
// log dir offline.
var (
	ErrStorage          = errors.New("log: storage error")
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	ErrOffsetMismatch   = errors.New("log: batch does not start at the log end offset")
	ErrBatchTooLarge    = errors.New("log: batch larger than the limit")
	ErrClosed           = errors.New("log: closed")
)

// storageError wraps an IO failure in ErrStorage with short context.
func storageError(err error, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %w", ErrStorage, fmt.Sprintf(format, args...), err)
}

// AppendInfo describes an append.
type AppendInfo struct {
	FirstOffset int64
	LastOffset  int64
	Bytes       int
}

// ReadInfo is the result of a read.
type ReadInfo struct {
	Data []byte // whole batches
}

// SegmentInfo describes one segment of the log.
type SegmentInfo struct {
	BaseOffset int64
	Size       int64 // bytes
}

// EpochCheckpointFile is the leader-epoch cache's file in the partition directory.
const EpochCheckpointFile = "leader-epoch-checkpoint"

// Log is safe for concurrent use: reads run alongside appends.
//
// Writers (appends, rolls, truncation, close) take mu. Readers take no lock:
// they load the segment list, the offsets and each segment's size
// atomically, and a truncation, which rewrites bytes readers may be reading,
// is fenced by the truncations sequence counter instead.
type Log struct {
	fsys   vfs.FS
	dir    string
	tp     tp.TopicPartition
	cfg    Config
	logger zerolog.Logger
	epochs *epoch.Cache

	// mu serialises writers. No fsync of appended data runs under it, but
	// for a truncation's (rare: a follower's divergence), which makes its
	// cut durable before anything else may depend on it.
	mu sync.Mutex
	// syncMu admits one data fsync at a time: appenders queued behind it find
	// their bytes made durable by the fsync ahead of them (group commit).
	// Lock order: syncMu before mu.
	syncMu sync.Mutex

	// segments is the list of segments, oldest first, never empty. It is
	// replaced, never modified, under mu, so a reader's copy stays consistent.
	segments atomic.Pointer[[]*segment]
	closed   atomic.Bool

	// Invariant: logStartOffset <= highWatermark <= logEndOffset and
	// recoveryPoint <= logEndOffset. logEndOffset moves after the bytes below
	// it are written and their segment's size is published.
	logEndOffset   atomic.Int64
	logStartOffset atomic.Int64
	recoveryPoint  atomic.Int64 // everything below is fsynced, index included
	highWatermark  atomic.Int64
	// hwMu orders UpdateHighWatermark with truncation's clamp without making
	// HW updates wait for appends' writes on mu.
	hwMu sync.Mutex

	// dirDirty: a segment file was created since the partition directory
	// was last fsynced; the next flush fsyncs the directory first.
	dirDirty atomic.Bool

	// truncations is odd while a truncation rewrites segments and grows by
	// two with each: a reader that sees it odd or moved retries (a seqlock).
	truncations atomic.Uint64

	// epochFloor (under mu) is the highest recovery point a truncation
	// lowered since the recovery point last reached it. The owner's
	// recovery-point checkpoint may still hold it, and a restart would trust
	// the records below it without reading their epochs again, so a new
	// epoch starting below it is written to the leader-epoch-checkpoint at
	// once instead of at the next flush (assignEpochLocked). 0: none.
	epochFloor int64
}

func (l *Log) segmentList() []*segment  { return *l.segments.Load() }
func (l *Log) setSegments(s []*segment) { l.segments.Store(&s) }
func (l *Log) activeSegment() *segment  { s := l.segmentList(); return s[len(s)-1] }

func (l *Log) Dir() string                       { return l.dir }
func (l *Log) TopicPartition() tp.TopicPartition { return l.tp }

// LogEndOffset is the offset the next appended record gets (the LEO).
func (l *Log) LogEndOffset() int64 { return l.logEndOffset.Load() }

// LogStartOffset is the first offset a read may ask for.
func (l *Log) LogStartOffset() int64 { return l.logStartOffset.Load() }

// RecoveryPoint is the offset below which everything is fsynced; the owner
// checkpoints it and passes it back to Open.
func (l *Log) RecoveryPoint() int64 { return l.recoveryPoint.Load() }

// HighWatermark is the HW last set with UpdateHighWatermark, lowered by truncation.
func (l *Log) HighWatermark() int64 { return l.highWatermark.Load() }

// EpochCache returns the log's leader-epoch cache.
func (l *Log) EpochCache() *epoch.Cache { return l.epochs }

// segmentIndex returns the index in segs of the segment holding offset (the
// first one when offset is below every segment).
func segmentIndex(segs []*segment, offset int64) int {
	i := sort.Search(len(segs), func(i int) bool { return segs[i].baseOffset > offset })
	return max(i-1, 0)
}

// UpdateHighWatermark sets the HW clamped to [LogStartOffset, LEO] and returns it.
func (l *Log) UpdateHighWatermark(hw int64) int64 {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	hw = min(max(hw, l.logStartOffset.Load()), l.logEndOffset.Load())
	l.highWatermark.Store(hw)
	return hw
}

// clampHighWatermark lowers the HW after the LEO dropped. Runs under mu,
// after the new offsets are stored.
func (l *Log) clampHighWatermark() {
	l.hwMu.Lock()
	defer l.hwMu.Unlock()
	hw := min(max(l.highWatermark.Load(), l.logStartOffset.Load()), l.logEndOffset.Load())
	l.highWatermark.Store(hw)
}

// LatestEpoch is the epoch of the last batch (epoch.Undefined when empty).
func (l *Log) LatestEpoch() int32 { return l.epochs.LatestEpoch() }

// MaybeAssignEpochStartOffset records a new leader epoch starting at offset
// (a leader's makeLeader). The entry is kept in memory and reaches the
// leader-epoch-checkpoint with the flush that makes the epoch's first
// records durable (or at Close): an epoch with no records needs no durable
// entry.
func (l *Log) MaybeAssignEpochStartOffset(leaderEpoch int32, startOffset int64) error {
	if leaderEpoch < 0 || startOffset < 0 {
		return fmt.Errorf("log: assign epoch %d at offset %d: negative", leaderEpoch, startOffset)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.epochs.AssignDeferred(leaderEpoch, startOffset); err != nil {
		return storageError(err, "assign epoch %d at %d", leaderEpoch, startOffset)
	}
	return nil
}

// Size is the total bytes of all segments.
func (l *Log) Size() int64 {
	var n int64
	for _, s := range l.segmentList() {
		n += s.size.Load()
	}
	return n
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	segs := l.segmentList()
	out := make([]SegmentInfo, len(segs))
	for i, s := range segs {
		out[i] = SegmentInfo{BaseOffset: s.baseOffset, Size: s.size.Load()}
	}
	return out
}
