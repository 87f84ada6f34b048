package log

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/epoch"
	"github.com/replicad/replicad/core/log/producerstate"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// Errors. IO failures are wrapped in ErrStorage so the caller can take the
// log dir offline; the first one also fails the log (see Log.fail).
var (
	ErrStorage = errors.New("log: storage error")
	// ErrFileLimit: a file could not be opened because the process or the
	// system is out of file descriptors (EMFILE, ENFILE). It is no fault of
	// the disk: the operation that needed the file failed and left nothing
	// of itself behind (see the package comment), and the log is not
	// failed.
	ErrFileLimit = errors.New("log: out of file descriptors")
	// ErrNameTooLong: a path the request named is longer than the file
	// system takes (ENAMETOOLONG). The request is at fault, not the disk:
	// nothing was created, and no dir goes offline for it.
	ErrNameTooLong      = errors.New("log: file name too long")
	ErrOffsetOutOfRange = errors.New("log: offset out of range")
	ErrOffsetMismatch   = errors.New("log: batch does not start at the log end offset")
	ErrBatchTooLarge    = errors.New("log: batch larger than the limit")
	ErrClosed           = errors.New("log: closed")
)

// storageError wraps an IO failure in ErrStorage with short context.
func storageError(err error, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %w", ErrStorage, fmt.Sprintf(format, args...), err)
}

// outOfDescriptors says whether err is a failed open for want of a file
// descriptor.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// NameTooLong says whether err comes from a name longer than the file
// system takes (ErrNameTooLong, ENAMETOOLONG): a fault of the request.
func NameTooLong(err error) bool {
	return errors.Is(err, ErrNameTooLong) || errors.Is(err, syscall.ENAMETOOLONG)
}

// OutOfDescriptors says whether err comes from running out of file
// descriptors (ErrFileLimit, EMFILE, ENFILE): no fault of a disk, and no
// reason to take a log dir offline.
func OutOfDescriptors(err error) bool { return errors.Is(err, ErrFileLimit) || outOfDescriptors(err) }

// ioError is the error of an operation that failed before it changed the
// log, or that undoes what it did (an append's write, roll or epoch entry, a
// flush): running out of descriptors is ErrFileLimit and the log goes on;
// anything else fails the log.
func (l *Log) ioError(err error, format string, args ...any) error {
	if outOfDescriptors(err) {
		return fmt.Errorf("%w: %s: %w", ErrFileLimit, fmt.Sprintf(format, args...), err)
	}
	return l.fail(storageError(err, format, args...))
}

// fail makes err, wrapping ErrStorage, the log's failure unless it already
// has one, and returns it. A failed log takes no more writes, flushes or
// truncations and its recovery point never moves again: after a failed
// fsync Linux may have marked the dirty pages clean and report the next
// fsync as a success ("fsyncgate"), so nothing written since the last good
// fsync can be known durable. The first failure is logged and reported to
// Options.OnStorageError, which takes the log dir offline; what was durable
// before it is recovered from disk when the dir comes back.
func (l *Log) fail(err error) error {
	if !l.failure.CompareAndSwap(nil, &err) {
		return err
	}
	l.logger.Error().Err(err).Str("dir", l.dir).Int64("recovery_point", l.recoveryPoint.Load()).
		Int64("log_end_offset", l.logEndOffset.Load()).Msg("log failed: no more writes until its dir is reopened")
	if l.onStorageError != nil {
		l.onStorageError(err)
	}
	return err
}

// failed returns the log's failure, or nil while it has none.
func (l *Log) failed() error {
	if p := l.failure.Load(); p != nil {
		return fmt.Errorf("log %s failed earlier: %w", l.dir, *p)
	}
	return nil
}

// Failed returns the I/O failure that failed the log, or nil.
func (l *Log) Failed() error { return l.failed() }

// usableLocked is the check every writer makes under mu before it changes
// the log: ErrClosed, the log's failure, or nil.
func (l *Log) usableLocked() error {
	if l.closed.Load() {
		return ErrClosed
	}
	return l.failed()
}

// appendableLocked is usableLocked for what adds to the log: a damaged log
// takes nothing until it is repaired.
func (l *Log) appendableLocked() error {
	if err := l.usableLocked(); err != nil {
		return err
	}
	if d := l.damage.Load(); d != nil {
		return fmt.Errorf("%w at offset %d (%w): repair it first", ErrDamaged, d.Offset, d.Cause)
	}
	return nil
}

// AppendInfo describes an append.
type AppendInfo struct {
	FirstOffset int64
	LastOffset  int64
	Bytes       int
	// Duplicate: a leader's append of an idempotent producer's retry of a
	// batch the log holds; nothing was appended, and the offsets are the
	// original batch's.
	Duplicate bool
	// Fenced: the batch was the first of a newer epoch of its producer at
	// the leader, which fences FencedEpoch from now on.
	Fenced      bool
	FencedEpoch int16
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
	cache  *FileCache // Options.FileCache: opens every segment and index file
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
	// segmentsDeleted counts the segments deleted below the log start.
	segmentsDeleted atomic.Int64

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

	// producers is the idempotent producers' state (producer.go), changed
	// under mu with the appends and truncations; producerCount is its size
	// for lock-free readers; producerGen grows with every rebuild, which
	// voids a snapshot taken before it.
	producers              *producerstate.Manager
	producerCount          atomic.Int64
	producerGen            uint64
	onProducerStateRebuilt func(ProducerRebuild)
	// lastSnapshot is the offset of the newest producer snapshot written
	// or loaded, -1 for none (under mu): Close writes one only when the
	// replay it saves the next Open is worth it.
	lastSnapshot int64

	// failure holds the log's first storage failure (see fail); nil while
	// healthy. onStorageError is Options.OnStorageError.
	failure        atomic.Pointer[error]
	onStorageError func(error)

	// onRecoveryPointLowered is Options.OnRecoveryPointLowered.
	onRecoveryPointLowered func() error

	// damage is set while the log is damaged at rest (see Damaged).
	damage atomic.Pointer[Damage]
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

// DurableEndOffset is the end of what this log's flush policy has made
// durable, which a leader may commit (let its HW cover): under
// FlushEveryBatch, the flushed offset (the recovery point, at most the
// LEO), since an append there is acknowledged only once fsynced and a
// record a consumer reads must survive a power loss as an acknowledged one
// does; under FlushInterval and FlushOS, the LEO: records there are
// durable by replication alone (they sit in the page cache of every ISR
// member), and the HW covers what the ISR holds, not what any disk holds.
func (l *Log) DurableEndOffset() int64 {
	leo := l.logEndOffset.Load()
	if l.cfg.FlushPolicy != FlushEveryBatch {
		return leo
	}
	return min(leo, l.recoveryPoint.Load())
}

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
	if err := l.appendableLocked(); err != nil {
		return err
	}
	// In memory only: nothing here touches the disk.
	return l.epochs.AssignDeferred(leaderEpoch, startOffset)
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
