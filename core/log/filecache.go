package log

import (
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"github.com/replicad/replicad/core/vfs"
)

// FileCache bounds the file descriptors the segments of many logs hold
// open, as RocksDB's and Pebble's table caches do: every segment and index
// file is opened through it, and when a new one would take it past its
// capacity it closes an idle one, which reopens on its next use. Without
// it a broker holds two descriptors per log, and a descriptor limit of
// 20,000 caps it near 9,000 partitions; with it the limit bounds only how
// many logs are busy at once.
//
// Eviction is CLOCK, an approximation of least recently used that costs a
// use no lock: a use sets the file's reference bit (one atomic load, and a
// store when it was clear), and the evictor, under the cache's mutex,
// walks the ring of open files clearing reference bits and takes the
// first file found clear and unpinned, passing over a few with unsynced
// writes for a clean one. Every use of a file pins it for the one call
// (an atomic add before and after): the evictor closes only a file with no
// pin, so a read, write or fsync in progress never sees its descriptor
// closed. A hit is those two atomic adds and no syscall; a miss is one
// open(2) and the close(2) of the file it evicts, plus that file's fsync
// when it has unsynced writes (FlushOS and FlushInterval logs:
// BenchmarkFileCache), run outside the cache's mutex.
//
// Durability: a file closed by the cache is fsynced first when it was
// written since its last fsync (its writes are in the page cache either
// way, but an fsync on a later descriptor may not see a write-back error
// of an earlier one: PostgreSQL's "fsyncgate"). A failed fsync there is
// kept and returned by every later Sync of the file, so the log that owns
// it fails at its next flush instead of counting the bytes durable.
//
// Capacity is soft: evicted files are closed after their descriptors are
// uncounted, so concurrent opens may go past it for as long as those
// closes take; and when every open file is pinned, an open goes past it
// rather than fail (a LeaderAndIsr creating thousands of logs must never
// fail for want of a descriptor the cache could free). And when an open
// fails with EMFILE or ENFILE anyway (descriptors held elsewhere in the
// process), the cache closes an eighth of its files and tries once more.
//
// A FileCache is safe for concurrent use and shared by every log of a
// broker (the log manager makes one from Config.MaxOpenFiles).
type FileCache struct {
	capacity int // <= 0: unbounded

	mu   sync.Mutex
	open int         // files open or being opened (reserved)
	hand *cachedFile // the clock hand; the ring of open files, nil when empty
	ring int         // files in the ring

	evictions      atomic.Int64
	dirtyEvictions atomic.Int64
	reopens        atomic.Int64
	overflows      atomic.Int64
}

// NewFileCache returns a cache holding at most capacity files open (see
// FileCache for when it goes past); capacity <= 0 means no bound.
func NewFileCache(capacity int) *FileCache { return &FileCache{capacity: capacity} }

// FileCacheStats is a snapshot of a FileCache (metrics, tests).
type FileCacheStats struct {
	Capacity  int   // 0: unbounded
	Open      int   // descriptors held now
	Evictions int64 // files closed to make room
	// DirtyEvictions of them had unsynced writes, and were fsynced first.
	DirtyEvictions int64
	Reopens        int64 // files reopened on use after an eviction
	Overflows      int64 // opens past the capacity, every open file being in use
}

// Stats returns the cache's figures.
func (c *FileCache) Stats() FileCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return FileCacheStats{Capacity: max(c.capacity, 0), Open: c.open, Evictions: c.evictions.Load(),
		DirtyEvictions: c.dirtyEvictions.Load(), Reopens: c.reopens.Load(), Overflows: c.overflows.Load()}
}

// closedBit in cachedFile.state marks the descriptor closed (evicted, or
// closed for good); the bits below count the pins.
const closedBit = int64(1) << 62

// cachedFile is a vfs.File whose descriptor the FileCache may close while
// it is idle and that reopens on its next use. Its file offset is not kept
// across a reopen: the log uses ReadAt and WriteAt only.
type cachedFile struct {
	cache *FileCache // nil: never evicted
	fsys  vfs.FS
	path  string

	// state is the pin count, plus closedBit while no descriptor is open.
	// A user adds a pin and, finding closedBit clear, uses f; the evictor
	// sets closedBit only by a compare-and-swap from zero pins.
	state atomic.Int64
	// ref is the CLOCK reference bit: set by each use, cleared by the hand.
	ref atomic.Bool
	// dirty: written since the last fsync, so closing it fsyncs first.
	dirty atomic.Bool

	// mu serialises opening and closing the descriptor. The evictor only
	// tries it (TryLock): a file being reopened or closed is skipped.
	mu sync.Mutex
	// f is the descriptor; read by a user holding a pin with closedBit
	// clear, written under mu while closedBit is set.
	f vfs.File
	// dead: closed for good (Close); under mu.
	dead bool
	// syncErr is the failure of an fsync the cache ran before closing the
	// file. Every later Sync returns it (see FileCache).
	syncErr atomic.Pointer[error]

	next, prev *cachedFile // the ring, under cache.mu
}

var _ vfs.File = (*cachedFile)(nil)

// openCached opens path through cache (which may be nil).
func openCached(cache *FileCache, fsys vfs.FS, path string, flag int, perm fs.FileMode) (*cachedFile, error) {
	f, err := cache.openFile(fsys, path, flag, perm)
	if err != nil {
		return nil, err
	}
	c := &cachedFile{cache: cache, fsys: fsys, path: path, f: f}
	cache.insert(c)
	return c, nil
}

// openFile opens a file for the cache: it reserves a descriptor, evicting
// an idle file when the cache is full, and retries once after freeing
// more when the process is out of descriptors all the same.
func (c *FileCache) openFile(fsys vfs.FS, path string, flag int, perm fs.FileMode) (vfs.File, error) {
	if c == nil {
		return fsys.OpenFile(path, flag, perm)
	}
	c.reserve()
	f, err := fsys.OpenFile(path, flag, perm)
	if err != nil && outOfDescriptors(err) {
		c.mu.Lock()
		var victims []*cachedFile
		for range max(1, c.ring/8) {
			v := c.evictOneLocked()
			if v == nil {
				break
			}
			victims = append(victims, v)
		}
		c.mu.Unlock()
		closeVictims(victims)
		f, err = fsys.OpenFile(path, flag, perm)
	}
	if err != nil {
		c.mu.Lock()
		c.open--
		c.mu.Unlock()
	}
	return f, err
}

// reserve counts one more open file, first evicting an idle one when the
// cache is full.
func (c *FileCache) reserve() {
	c.mu.Lock()
	var victims []*cachedFile
	if c.capacity > 0 {
		for c.open >= c.capacity {
			v := c.evictOneLocked()
			if v == nil {
				c.overflows.Add(1)
				break
			}
			victims = append(victims, v)
		}
	}
	c.open++
	c.mu.Unlock()
	closeVictims(victims)
}

// closeVictims closes the descriptors of the files evictOneLocked took,
// outside the cache's mutex: the fsync of a dirty one must not hold up
// every other open. A user of a victim waits on its mu meanwhile, then
// reopens it.
func closeVictims(victims []*cachedFile) {
	for _, v := range victims {
		v.closeLocked()
		v.mu.Unlock()
	}
}

// insert puts a file just opened (reserved) into the ring, behind the hand:
// the last the hand reaches.
func (c *FileCache) insert(f *cachedFile) {
	f.ref.Store(true)
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hand == nil {
		f.next, f.prev = f, f
		c.hand = f
	} else {
		f.next, f.prev = c.hand, c.hand.prev
		f.prev.next, f.next.prev = f, f
	}
	c.ring++
}

// unlinkLocked takes f out of the ring and releases its descriptor.
func (c *FileCache) unlinkLocked(f *cachedFile) {
	if f.next == nil {
		return
	}
	if f.next == f {
		c.hand = nil
	} else {
		f.prev.next, f.next.prev = f.next, f.prev
		if c.hand == f {
			c.hand = f.next
		}
	}
	f.next, f.prev = nil, nil
	c.ring--
	c.open--
}

// cleanLookahead is how many idle files with unsynced writes the hand
// passes over, looking for a clean one, before it takes one of them:
// closing a dirty file costs an fsync, a clean one only close(2).
const cleanLookahead = 64

// evictOneLocked takes the least recently used idle file (CLOCK),
// preferring one without unsynced writes: the hand clears reference bits
// on its way, so two turns of the ring visit every file with its bit
// clear. The file it returns is unlinked, marked closed and locked (its
// mu); the caller closes its descriptor (closeVictims) once it has
// released the cache's mutex. nil: every file is in use.
func (c *FileCache) evictOneLocked() *cachedFile {
	var dirty *cachedFile
	skipped := 0
	for range 2*c.ring + 1 {
		f := c.hand
		if f == nil {
			break
		}
		c.hand = f.next
		if f.ref.Load() {
			f.ref.Store(false)
			continue
		}
		if f.dirty.Load() && skipped < cleanLookahead {
			skipped++
			if dirty == nil {
				dirty = f
			}
			continue
		}
		if c.takeLocked(f) {
			return f
		}
	}
	if dirty != nil && dirty.next != nil && c.takeLocked(dirty) {
		return dirty
	}
	return nil
}

// takeLocked makes f, an idle file in the ring, the victim of an
// eviction, unless it is in use: pinned, or being reopened or closed.
func (c *FileCache) takeLocked(f *cachedFile) bool {
	if !f.mu.TryLock() {
		return false
	}
	if !f.state.CompareAndSwap(0, closedBit) {
		f.mu.Unlock()
		return false
	}
	c.unlinkLocked(f)
	c.evictions.Add(1)
	return true
}

// closeLocked closes the descriptor of a file no one holds a pin on,
// fsyncing it first when it has unsynced writes. Under f.mu.
func (f *cachedFile) closeLocked() {
	if f.dirty.Swap(false) {
		if f.cache != nil {
			f.cache.dirtyEvictions.Add(1)
		}
		if err := f.f.Sync(); err != nil {
			err = fmt.Errorf("fsync before closing idle file %s: %w", f.path, err)
			f.syncErr.CompareAndSwap(nil, &err)
		}
	}
	_ = f.f.Close()
	// Nothing reads f while closedBit is set, and an idle log should not
	// keep a closed file's memory.
	f.f = nil
}

// get pins the file and returns its descriptor, reopening it if the cache
// closed it. Every get is followed by one put.
func (f *cachedFile) get() (vfs.File, error) {
	if f.state.Add(1)&closedBit == 0 {
		if !f.ref.Load() {
			f.ref.Store(true)
		}
		return f.f, nil
	}
	f.state.Add(-1)
	return f.reopen()
}

// put unpins the file.
func (f *cachedFile) put() { f.state.Add(-1) }

// reopen is get's slow path: the descriptor is closed.
func (f *cachedFile) reopen() (vfs.File, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return nil, &fs.PathError{Op: "use", Path: f.path, Err: fs.ErrClosed}
	}
	if f.state.Load()&closedBit == 0 {
		// Reopened by another user meanwhile.
		f.state.Add(1)
		f.ref.Store(true)
		return f.f, nil
	}
	// The file exists: its segment's creation opened it. O_RDWR only, so
	// a file deleted meanwhile is an error, not a new empty file.
	nf, err := f.cache.openFile(f.fsys, f.path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	f.cache.reopens.Add(1)
	f.f = nf
	// Pinned before it is published: the evictor cannot take it back
	// before this user has used it (it also fails to TryLock mu).
	f.state.Add(1 - closedBit)
	f.cache.insert(f)
	return nf, nil
}

func (f *cachedFile) Name() string { return f.path }

func (f *cachedFile) ReadAt(p []byte, off int64) (int, error) {
	h, err := f.get()
	if err != nil {
		return 0, err
	}
	defer f.put()
	return h.ReadAt(p, off)
}

func (f *cachedFile) WriteAt(p []byte, off int64) (int, error) {
	h, err := f.get()
	if err != nil {
		return 0, err
	}
	defer f.put()
	n, err := h.WriteAt(p, off)
	f.markDirty()
	return n, err
}

// Write writes at the descriptor's offset, which a reopen resets to 0:
// only for files the cache cannot have closed since they were opened
// (none of the log's).
func (f *cachedFile) Write(p []byte) (int, error) {
	h, err := f.get()
	if err != nil {
		return 0, err
	}
	defer f.put()
	n, err := h.Write(p)
	f.markDirty()
	return n, err
}

// markDirty records a write after it happened: a Sync that cleared the
// flag before its fsync covers the writes made before it.
func (f *cachedFile) markDirty() {
	if !f.dirty.Load() {
		f.dirty.Store(true)
	}
}

func (f *cachedFile) Sync() error {
	h, err := f.get()
	if err != nil {
		return err
	}
	defer f.put()
	if p := f.syncErr.Load(); p != nil {
		return *p
	}
	f.dirty.Store(false)
	if err := h.Sync(); err != nil {
		f.dirty.Store(true)
		return err
	}
	return nil
}

func (f *cachedFile) Truncate(size int64) error {
	h, err := f.get()
	if err != nil {
		return err
	}
	defer f.put()
	err = h.Truncate(size)
	f.markDirty()
	return err
}

func (f *cachedFile) Stat() (fs.FileInfo, error) {
	h, err := f.get()
	if err != nil {
		return nil, err
	}
	defer f.put()
	return h.Stat()
}

// Close closes the file for good. A user still holding a pin finishes its
// call on the closed descriptor (fs.ErrClosed, as with package os).
func (f *cachedFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return &fs.PathError{Op: "close", Path: f.path, Err: fs.ErrClosed}
	}
	f.dead = true
	if f.state.Load()&closedBit != 0 {
		return nil // evicted: no descriptor
	}
	f.state.Add(closedBit)
	if f.cache != nil {
		f.cache.mu.Lock()
		f.cache.unlinkLocked(f)
		f.cache.mu.Unlock()
	}
	return f.f.Close()
}
