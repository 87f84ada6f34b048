package log

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/replicad/replicad/core/record"
)

// Read returns whole batches starting with the one holding startOffset, up to
// maxBytes (at least one batch when there is one), and none whose base offset
// is >= maxOffset. startOffset outside [LogStartOffset, LEO] is ErrOffsetOutOfRange.
//
// Batches come from one segment: a read that reaches a segment's end returns
// less than maxBytes, and the caller reads on from the next offset. Read takes
// no lock, so it never waits for an append's fsync.
func (l *Log) Read(startOffset int64, maxBytes int, maxOffset int64) (ReadInfo, error) {
	for {
		gen := l.truncations.Load()
		if gen&1 == 1 {
			// A truncation is rewriting segments under mu: taking mu waits for
			// it to finish (the empty critical section is the point).
			l.mu.Lock()
			l.mu.Unlock()
			continue
		}
		info, err := l.read(startOffset, maxBytes, maxOffset)
		if l.truncations.Load() == gen {
			if errors.Is(err, ErrStorage) {
				// Not a file a truncation closed under us: the disk failed.
				err = l.fail(err)
			}
			return info, err
		}
		// A truncation ran during the read: what we read may mix old and new bytes.
	}
}

func (l *Log) read(startOffset int64, maxBytes int, maxOffset int64) (ReadInfo, error) {
	if l.closed.Load() {
		return ReadInfo{}, ErrClosed
	}
	logStartOffset, logEndOffset := l.logStartOffset.Load(), l.logEndOffset.Load()
	if startOffset < logStartOffset || startOffset > logEndOffset {
		return ReadInfo{}, fmt.Errorf("%w: offset %d, log holds [%d, %d)",
			ErrOffsetOutOfRange, startOffset, logStartOffset, logEndOffset)
	}
	if startOffset == logEndOffset {
		return ReadInfo{}, nil
	}
	// Nothing at or past the LEO is served: a damaged log's segments hold
	// bytes past it (see Damaged).
	maxOffset = min(maxOffset, logEndOffset)
	segs := l.segmentList()
	if d := l.damage.Load(); d != nil {
		// Nor any segment after the damaged one: one that overlaps it
		// would be chosen for offsets below the damage.
		if k := slices.Index(segs, d.seg); k >= 0 {
			segs = segs[:k+1]
		}
	}
	for _, s := range segs[segmentIndex(segs, startOffset):] {
		data, found, err := s.read(startOffset, maxBytes, maxOffset)
		if err != nil {
			if l.closed.Load() && errors.Is(err, fs.ErrClosed) {
				return ReadInfo{}, ErrClosed
			}
			if outOfDescriptors(err) {
				// The file cache could not reopen a closed segment file:
				// no fault of the disk, and the log goes on.
				return ReadInfo{}, fmt.Errorf("%w: read offset %d: %w", ErrFileLimit, startOffset, err)
			}
			if errors.Is(err, record.ErrCorrupt) {
				// Damage at rest, not a failing disk: the owner deals with
				// the partition, the log goes on (core's corruption.go).
				return ReadInfo{}, fmt.Errorf("log: read offset %d: %w", startOffset, err)
			}
			return ReadInfo{}, storageError(err, "read offset %d", startOffset)
		}
		if found {
			return ReadInfo{Data: data}, nil
		}
	}
	return ReadInfo{}, nil
}
