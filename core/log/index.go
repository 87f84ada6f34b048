package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/replicad/replicad/core/vfs"
)

const (
	indexEntrySize = 8 // relative offset uint32, then file position uint32
	// indexChunkEntries is how many entries a lookup reads at once when its
	// binary search has narrowed to that many (one 4 KiB pread).
	indexChunkEntries = 512
)

// offsetIndex is a segment's sparse offset index (Kafka's OffsetIndex): it
// maps the base offset of some of the segment's batches, relative to the
// segment's base offset, to their position in the log file. An entry is added
// for a batch when more than IndexIntervalBytes were appended since the batch
// of the previous entry (or the segment start): the entries are a pure
// function of the batches and the interval, so recovery rebuilds exactly what
// appends wrote. Position 0 is never indexed; a lookup that finds no entry
// starts there.
//
// Entries stay on disk, not in memory: a lookup binary-searches the file with
// pread, so an idle log costs no heap whatever its size, and lookups near the
// log end (followers, tailing consumers) are answered from the cached last
// entry without any IO. The file is not preallocated, and it is created and
// opened only once it has an entry (or its segment is sealed): a new or small
// partition costs one file descriptor and one file creation, not two.
//
// Appends and truncation run under Log.mu; lookups run concurrently and only
// read the first count entries, which were written before being counted.
type offsetIndex struct {
	fsys       vfs.FS
	cache      *FileCache // opens file (nil: no cache)
	baseOffset int64
	path       string
	// file is nil until the index has entries. Set under Log.mu before count
	// becomes positive, and then never unset until the segment closes, so a
	// reader that sees count > 0 sees the file.
	file  vfs.File
	count atomic.Int64  // entries in the file
	last  atomic.Uint64 // the newest entry, packed; meaningful when count > 0
	dirty atomic.Bool   // entries written since the last fsync
	// scratch is the buffer of the entry reads and writes that run under
	// Log.mu (append, setCount). A local array handed to File.WriteAt or
	// ReadAt, interface methods, would be allocated on every call.
	scratch [indexEntrySize]byte
}

// indexChunk is one chunk of entries.
type indexChunk = [indexChunkEntries * indexEntrySize]byte

type indexEntry struct {
	relOffset uint32
	position  uint32
}

func (e indexEntry) pack() uint64 { return uint64(e.relOffset)<<32 | uint64(e.position) }
func unpackEntry(v uint64) indexEntry {
	return indexEntry{relOffset: uint32(v >> 32), position: uint32(v)}
}

func decodeEntry(b []byte) indexEntry {
	return indexEntry{relOffset: binary.BigEndian.Uint32(b), position: binary.BigEndian.Uint32(b[4:])}
}

// indexChunks lends lookups a buffer of one chunk of entries.
var indexChunks = sync.Pool{New: func() any { return new(indexChunk) }}

// errIndexInvalid: the index file does not match the log; recovery rebuilds it.
var errIndexInvalid = errors.New("index invalid")

// load opens the index file, if there is one, and reads its entry count and
// last entry. A missing file is errIndexInvalid: roll creates the file of
// every sealed segment, so only the active one may lack it, and recovery
// rebuilds that one anyway.
func (ix *offsetIndex) load() error {
	f, err := openCached(ix.cache, ix.fsys, ix.path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: missing", errIndexInvalid)
	}
	if err != nil {
		return err
	}
	ix.file = f
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size()%indexEntrySize != 0 {
		return fmt.Errorf("%w: size %d is not a multiple of %d", errIndexInvalid, fi.Size(), indexEntrySize)
	}
	if fi.Size() == 0 {
		// Keep no descriptor for an empty index; append reopens it.
		ix.file = nil
		return f.Close()
	}
	return ix.setCount(fi.Size() / indexEntrySize)
}

// create opens the index file, emptying it, when it is not open yet. Runs
// under Log.mu.
func (ix *offsetIndex) create() error {
	if ix.file != nil {
		return nil
	}
	f, err := openCached(ix.cache, ix.fsys, ix.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	ix.file = f
	return nil
}

// setCount makes the first n entries the index, re-reading the last one.
func (ix *offsetIndex) setCount(n int64) error {
	if n > 0 {
		e, err := ix.entry(n-1, ix.scratch[:])
		if err != nil {
			return err
		}
		ix.last.Store(e.pack())
	}
	ix.count.Store(n)
	return nil
}

// entry reads entry i using buf, which the caller owns (see scratch).
func (ix *offsetIndex) entry(i int64, buf []byte) (indexEntry, error) {
	b := buf[:indexEntrySize]
	if _, err := ix.file.ReadAt(b, i*indexEntrySize); err != nil {
		return indexEntry{}, err
	}
	return decodeEntry(b), nil
}

// lastEntry returns the newest entry, if any.
func (ix *offsetIndex) lastEntry() (indexEntry, bool) {
	if ix.count.Load() == 0 {
		return indexEntry{}, false
	}
	return unpackEntry(ix.last.Load()), true
}

// lastPosition is the position of the newest entry, 0 without one: where the
// bytes counted towards the next entry start.
func (ix *offsetIndex) lastPosition() int64 {
	e, _ := ix.lastEntry()
	return int64(e.position)
}

// append adds an entry after the newest one. Runs under Log.mu.
func (ix *offsetIndex) append(offset, position int64) error {
	e := indexEntry{relOffset: uint32(offset - ix.baseOffset), position: uint32(position)}
	b := ix.scratch[:]
	binary.BigEndian.PutUint32(b, e.relOffset)
	binary.BigEndian.PutUint32(b[4:], e.position)
	if err := ix.create(); err != nil {
		return err
	}
	n := ix.count.Load()
	if _, err := ix.file.WriteAt(b, n*indexEntrySize); err != nil {
		return err
	}
	ix.dirty.Store(true)
	// last before count: a reader that sees the new count must see the entry.
	ix.last.Store(e.pack())
	ix.count.Store(n + 1)
	return nil
}

// lookup returns the newest entry whose offset is <= offset; false when
// there is none, and the search should start at position 0.
func (ix *offsetIndex) lookup(offset int64) (indexEntry, bool, error) {
	n := ix.count.Load()
	if n == 0 || offset < ix.baseOffset {
		return indexEntry{}, false, nil
	}
	rel := offset - ix.baseOffset
	if last := unpackEntry(ix.last.Load()); rel >= int64(last.relOffset) {
		return last, true, nil
	}
	chunk := indexChunks.Get().(*indexChunk)
	defer indexChunks.Put(chunk)
	k, err := ix.search(n, func(e indexEntry) bool { return int64(e.relOffset) <= rel }, chunk)
	if err != nil || k == 0 {
		return indexEntry{}, false, err
	}
	e, err := ix.entry(k-1, chunk[:])
	return e, err == nil, err
}

// search returns how many leading entries among the first n satisfy below,
// which must hold for a prefix of the entries (they increase in both fields).
// It probes single entries until the range fits in one chunk, then reads the
// chunk: about log2(n/512)+1 preads, all into the caller's chunk.
func (ix *offsetIndex) search(n int64, below func(indexEntry) bool, chunk *indexChunk) (int64, error) {
	lo, hi := int64(0), n // entries before lo are below; entries from hi on are not
	for hi-lo > indexChunkEntries {
		mid := lo + (hi-lo)/2
		e, err := ix.entry(mid, chunk[:])
		if err != nil {
			return 0, err
		}
		if below(e) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == hi {
		return lo, nil
	}
	buf := chunk[:(hi-lo)*indexEntrySize]
	if _, err := ix.file.ReadAt(buf, lo*indexEntrySize); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	for len(buf) > 0 && below(decodeEntry(buf)) {
		lo++
		buf = buf[indexEntrySize:]
	}
	return lo, nil
}

// truncateBelowPosition keeps only the entries of batches that start before
// position (the log file is being cut there). Runs under Log.mu.
func (ix *offsetIndex) truncateBelowPosition(position int64) error {
	n := ix.count.Load()
	if n == 0 {
		return nil
	}
	chunk := indexChunks.Get().(*indexChunk)
	defer indexChunks.Put(chunk)
	k, err := ix.search(n, func(e indexEntry) bool { return int64(e.position) < position }, chunk)
	if err != nil {
		return err
	}
	return ix.truncateEntries(k)
}

// truncateEntries keeps the first k entries. Runs under Log.mu.
func (ix *offsetIndex) truncateEntries(k int64) error {
	if k == ix.count.Load() {
		return nil
	}
	if err := ix.file.Truncate(k * indexEntrySize); err != nil {
		return err
	}
	ix.dirty.Store(true)
	return ix.setCount(k)
}

// reset empties the index, whatever the file holds (before a rebuild).
func (ix *offsetIndex) reset() error {
	ix.count.Store(0)
	if ix.file == nil {
		return removeIfExists(ix.fsys, ix.path)
	}
	if err := ix.file.Truncate(0); err != nil {
		return err
	}
	ix.dirty.Store(true)
	return nil
}

// discard closes and deletes the index file and empties the index: lookups
// then scan the segment from its start, and a restart finds the index
// missing and re-reads the whole segment.
func (ix *offsetIndex) discard() error {
	var err error
	if ix.file != nil {
		err = ix.file.Close()
		ix.file = nil
	}
	ix.count.Store(0)
	ix.dirty.Store(false)
	return errors.Join(err, removeIfExists(ix.fsys, ix.path))
}

// seal makes the index durable for a segment that will not change: recovery
// trusts a sealed segment's index, and reads a missing one as damage, so an
// index without entries gets its (empty) file here.
func (ix *offsetIndex) seal() error {
	if ix.file == nil {
		f, err := openCached(ix.cache, ix.fsys, ix.path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return err
		}
		return errors.Join(f.Sync(), f.Close())
	}
	return ix.sync()
}

func (ix *offsetIndex) close() error {
	if ix.file == nil {
		return nil
	}
	return ix.file.Close()
}

// sync fsyncs the index if entries changed since the last fsync.
func (ix *offsetIndex) sync() error {
	if !ix.dirty.Swap(false) {
		return nil
	}
	if err := ix.file.Sync(); err != nil {
		ix.dirty.Store(true)
		return err
	}
	return nil
}
