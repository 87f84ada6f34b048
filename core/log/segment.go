package log

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/vfs"
)

const (
	logFileSuffix   = ".log"
	indexFileSuffix = ".index"
	// segmentNameDigits: files are named by their base offset, zero-padded so
	// that names sort as offsets do (Kafka's format).
	segmentNameDigits = 20
)

// segment is one file of the log, holding the batches from baseOffset up to
// the next segment's base offset, with its sparse offset index.
//
// Writes happen under Log.mu. Readers rely on size alone: it is published only
// after the bytes below it are written, so a reader never sees part of a batch.
type segment struct {
	baseOffset int64
	file       vfs.File
	index      offsetIndex
	size       atomic.Int64 // bytes of whole batches in file
	// maxTimestamp is the largest max timestamp of its batches (retention
	// by time), -1 while empty; timestampUnknown for a segment opened from
	// disk (or cut) until largestTimestamp scans it.
	maxTimestamp atomic.Int64
	// firstTimestamp is its first batch's max timestamp, which a roll by
	// time (segment.ms) measures from, as Kafka's rollingBasedTimestamp: -1
	// while empty, timestampUnknown for a segment opened from disk until
	// rollBaseTimestamp reads it. Guarded by Log.mu.
	firstTimestamp int64
}

// timestampUnknown marks segment.maxTimestamp not computed yet.
const timestampUnknown = math.MinInt64

func segmentPath(dir string, baseOffset int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%0*d%s", segmentNameDigits, baseOffset, suffix))
}

// parseSegmentName returns the base offset and suffix of a segment file name.
func parseSegmentName(name string) (baseOffset int64, suffix string, ok bool) {
	if len(name) <= segmentNameDigits {
		return 0, "", false
	}
	digits, suffix := name[:segmentNameDigits], name[segmentNameDigits:]
	if suffix != logFileSuffix && suffix != indexFileSuffix {
		return 0, "", false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, "", false
		}
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, suffix, err == nil
}

// createSegment creates the empty log file of a new segment, replacing a
// leftover with the same name. Its index file comes with the first entry.
func createSegment(fsys vfs.FS, cache *FileCache, dir string, baseOffset int64) (*segment, error) {
	s, err := openSegmentFile(fsys, cache, dir, baseOffset, os.O_CREATE|os.O_TRUNC)
	if err == nil {
		s.maxTimestamp.Store(-1) // empty, and every batch written from now on is counted
		s.firstTimestamp = -1
	}
	return s, err
}

// openSegment opens an existing segment. indexValid is false when the index
// is missing or unusable, and recovery must rebuild it.
func openSegment(fsys vfs.FS, cache *FileCache, dir string, baseOffset int64) (s *segment, indexValid bool, err error) {
	s, err = openSegmentFile(fsys, cache, dir, baseOffset, 0)
	if err != nil {
		return nil, false, err
	}
	fi, err := s.file.Stat()
	if err != nil {
		s.close()
		return nil, false, fmt.Errorf("stat segment %d: %w", baseOffset, err)
	}
	s.size.Store(fi.Size())
	if err := s.index.load(); err != nil {
		if !errors.Is(err, errIndexInvalid) {
			s.close()
			return nil, false, fmt.Errorf("load index of segment %d: %w", baseOffset, err)
		}
		return s, false, nil
	}
	valid, err := s.lastIndexEntryValid()
	if err != nil {
		s.close()
		return nil, false, err
	}
	return s, valid, nil
}

// openSegmentFile opens the log file of a segment through cache (nil: no
// cache), which may close it while idle and reopens it on use; so is the
// index file when it comes.
func openSegmentFile(fsys vfs.FS, cache *FileCache, dir string, baseOffset int64, flag int) (*segment, error) {
	file, err := openCached(cache, fsys, segmentPath(dir, baseOffset, logFileSuffix), os.O_RDWR|flag, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open segment %d: %w", baseOffset, err)
	}
	s := &segment{baseOffset: baseOffset, file: file, firstTimestamp: timestampUnknown}
	s.maxTimestamp.Store(timestampUnknown)
	s.index.fsys, s.index.cache, s.index.baseOffset, s.index.path = fsys, cache, baseOffset, segmentPath(dir, baseOffset, indexFileSuffix)
	return s, nil
}

// lastIndexEntryValid is Kafka's index sanity check: the newest entry must
// point at a batch inside the file holding the entry's offset. A torn or
// stale index fails it and is rebuilt.
func (s *segment) lastIndexEntryValid() (bool, error) {
	e, ok := s.index.lastEntry()
	if !ok {
		return true, nil
	}
	h, ok, err := s.headerAt(int64(e.position))
	if err != nil || !ok {
		return false, err
	}
	return e.position > 0 && h.BaseOffset() == s.baseOffset+int64(e.relOffset), nil
}

// headerAt reads the header of the batch at pos; false when what is there
// cannot be a batch inside the file.
func (s *segment) headerAt(pos int64) (record.Batch, bool, error) {
	size := s.size.Load()
	if pos < 0 || pos+record.HeaderSize > size {
		return nil, false, nil
	}
	h := make(record.Batch, record.HeaderSize)
	if _, err := s.file.ReadAt(h, pos); err != nil {
		return nil, false, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
	}
	n, err := record.Size(h)
	return h, err == nil && pos+int64(n) <= size, nil
}

// write puts data at the end of the file and indexes its batches; the caller
// publishes the new size once the write is complete.
func (s *segment) write(data []byte, batches []record.Batch, indexIntervalBytes int) error {
	pos := s.size.Load()
	if _, err := s.file.WriteAt(data, pos); err != nil {
		return fmt.Errorf("write segment %d at %d: %w", s.baseOffset, pos, err)
	}
	ts := s.maxTimestamp.Load()
	if s.firstTimestamp == -1 && len(batches) > 0 {
		s.firstTimestamp = batches[0].MaxTimestamp()
	}
	for _, b := range batches {
		if err := s.maybeIndex(b.BaseOffset(), pos, indexIntervalBytes); err != nil {
			return err
		}
		pos += int64(len(b))
		if ts != timestampUnknown {
			ts = max(ts, b.MaxTimestamp())
		}
	}
	s.maxTimestamp.Store(ts)
	return nil
}

// largestTimestamp is maxTimestamp, scanning the batch headers of a
// segment opened from disk the first time (it is cached: only sealed
// segments are asked, and those change only by a truncation, which forgets
// it). -1: no batch.
func (s *segment) largestTimestamp() (int64, error) {
	if ts := s.maxTimestamp.Load(); ts != timestampUnknown {
		return ts, nil
	}
	chunk := readChunks.Get().(*[readChunkSize]byte)
	defer readChunks.Put(chunk)
	ts, end := int64(-1), s.size.Load()
	h := chunk[:record.HeaderSize]
	for pos := int64(0); pos < end; {
		if pos+record.HeaderSize > end {
			return 0, fmt.Errorf("%w: segment %d: partial header at %d", record.ErrCorrupt, s.baseOffset, pos)
		}
		if _, err := s.file.ReadAt(h, pos); err != nil {
			return 0, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
		}
		size, err := record.Size(record.Batch(h))
		if err != nil {
			return 0, fmt.Errorf("%w: segment %d: bad batch at %d", record.ErrCorrupt, s.baseOffset, pos)
		}
		ts = max(ts, record.Batch(h).MaxTimestamp())
		pos += int64(size)
	}
	s.maxTimestamp.CompareAndSwap(timestampUnknown, ts)
	return ts, nil
}

// maybeIndex adds an index entry for the batch at pos when more than
// indexIntervalBytes were appended since the previous entry (Kafka's rule).
func (s *segment) maybeIndex(baseOffset, pos int64, indexIntervalBytes int) error {
	if pos-s.index.lastPosition() <= int64(indexIntervalBytes) {
		return nil
	}
	if err := s.index.append(baseOffset, pos); err != nil {
		return fmt.Errorf("write index of segment %d: %w", s.baseOffset, err)
	}
	return nil
}

// truncate cuts the file, and the index entries of the batches it drops, at size.
func (s *segment) truncate(size int64) error {
	if err := s.index.truncateBelowPosition(size); err != nil {
		return fmt.Errorf("truncate index of segment %d: %w", s.baseOffset, err)
	}
	if err := s.file.Truncate(size); err != nil {
		return fmt.Errorf("truncate segment %d to %d: %w", s.baseOffset, size, err)
	}
	s.size.Store(size)
	s.maxTimestamp.Store(timestampUnknown) // the batches cut may have held it
	if size == 0 {
		s.firstTimestamp = -1
	}
	return nil
}

// rollBaseTimestamp is firstTimestamp, reading the first batch's header
// of a segment opened from disk the first time. -1: empty. Under Log.mu.
func (s *segment) rollBaseTimestamp() (int64, error) {
	if s.firstTimestamp != timestampUnknown {
		return s.firstTimestamp, nil
	}
	if s.size.Load() < record.HeaderSize {
		s.firstTimestamp = -1
		return -1, nil
	}
	var h [record.HeaderSize]byte
	if _, err := s.file.ReadAt(h[:], 0); err != nil {
		return 0, fmt.Errorf("read segment %d at 0: %w", s.baseOffset, err)
	}
	s.firstTimestamp = record.Batch(h[:]).MaxTimestamp()
	return s.firstTimestamp, nil
}

// sync fsyncs the log file and, if it changed, the index.
func (s *segment) sync() error {
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("fsync segment %d: %w", s.baseOffset, err)
	}
	if err := s.index.sync(); err != nil {
		return fmt.Errorf("fsync index of segment %d: %w", s.baseOffset, err)
	}
	return nil
}

// seal makes a segment that will take no more appends durable, index included.
func (s *segment) seal() error {
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("fsync segment %d: %w", s.baseOffset, err)
	}
	if err := s.index.seal(); err != nil {
		return fmt.Errorf("seal index of segment %d: %w", s.baseOffset, err)
	}
	return nil
}

func (s *segment) close() error {
	return errors.Join(s.file.Close(), s.index.close())
}

// remove closes and deletes the segment's files.
func (s *segment) remove() error {
	_ = s.close()
	return errors.Join(removeIfExists(s.index.fsys, s.file.Name()), removeIfExists(s.index.fsys, s.index.path))
}

func removeIfExists(fsys vfs.FS, path string) error {
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// readChunkSize is how much locate reads at once while hopping over batch headers.
const readChunkSize = 8 << 10

var readChunks = sync.Pool{New: func() any { return new([readChunkSize]byte) }}

// batchLocation is where a batch starts and how it begins.
type batchLocation struct {
	position   int64
	size       int
	baseOffset int64
}

// locate finds the first batch at or after pos (a batch boundary) whose last
// offset is >= offset, reading headers only, below end. found is false when
// no batch below end reaches offset.
func (s *segment) locate(offset, pos, end int64) (loc batchLocation, found bool, err error) {
	chunk := readChunks.Get().(*[readChunkSize]byte)
	defer readChunks.Put(chunk)
	var buf []byte // holds the file from bufStart
	var bufStart int64
	for pos < end {
		if pos+record.HeaderSize > end {
			return loc, false, fmt.Errorf("%w: segment %d: partial header at %d", record.ErrCorrupt, s.baseOffset, pos)
		}
		if pos < bufStart || pos+record.HeaderSize > bufStart+int64(len(buf)) {
			n := min(int64(readChunkSize), end-pos)
			if _, err := s.file.ReadAt(chunk[:n], pos); err != nil {
				return loc, false, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, pos, err)
			}
			buf, bufStart = chunk[:n], pos
		}
		h := record.Batch(buf[pos-bufStart:])
		size, err := record.Size(h)
		if err != nil || pos+int64(size) > end {
			return loc, false, fmt.Errorf("%w: segment %d: bad batch at %d", record.ErrCorrupt, s.baseOffset, pos)
		}
		if h.LastOffset() >= offset {
			return batchLocation{position: pos, size: size, baseOffset: h.BaseOffset()}, true, nil
		}
		pos += int64(size)
	}
	return loc, false, nil
}

// startFor returns where to start looking for offset: the position of the
// nearest indexed batch at or before it, or the segment start.
func (s *segment) startFor(offset int64) (int64, error) {
	e, ok, err := s.index.lookup(offset)
	if err != nil {
		return 0, fmt.Errorf("read index of segment %d: %w", s.baseOffset, err)
	}
	if !ok {
		return 0, nil
	}
	return int64(e.position), nil
}

// read returns whole batches from the one holding offset, at most maxBytes
// of them unless the first alone is larger, stopping before a batch whose
// base offset is >= maxOffset. found is false when the segment holds nothing
// at or after offset.
func (s *segment) read(offset int64, maxBytes int, maxOffset int64) (data []byte, found bool, err error) {
	end := s.size.Load()
	pos, err := s.startFor(offset)
	if err != nil {
		return nil, false, err
	}
	loc, found, err := s.locate(offset, pos, end)
	if err != nil || !found {
		return nil, found, err
	}
	if loc.baseOffset > offset {
		// Offsets are contiguous: the batch holding offset starts at or
		// before it. One that starts after it has a damaged base offset
		// (a field outside the CRC); serving nothing here would leave a
		// reader waiting at offset for ever.
		return nil, true, fmt.Errorf("%w: segment %d: the batch at %d for offset %d has base offset %d",
			record.ErrCorrupt, s.baseOffset, loc.position, offset, loc.baseOffset)
	}
	if loc.baseOffset >= maxOffset {
		return nil, true, nil
	}
	n := min(end-loc.position, int64(max(maxBytes, loc.size)))
	buf := make([]byte, n)
	if _, err := s.file.ReadAt(buf, loc.position); err != nil {
		return nil, true, fmt.Errorf("read segment %d at %d: %w", s.baseOffset, loc.position, err)
	}
	// Keep whole batches below maxOffset; maxBytes may have cut the last one.
	used, rest := 0, buf
	for {
		b, next, err := record.Next(rest)
		if err != nil || b.BaseOffset() >= maxOffset {
			break
		}
		used += len(b)
		rest = next
	}
	if used == 0 {
		return nil, true, fmt.Errorf("%w: segment %d: bad batch at %d", record.ErrCorrupt, s.baseOffset, loc.position)
	}
	if used < len(buf)/2 {
		// maxOffset cut most of what was read: do not pin the rest in memory.
		return bytes.Clone(buf[:used]), true, nil
	}
	return buf[:used:used], true, nil
}
