// Package epoch is the leader-epoch cache of one partition's log (Kafka's
// LeaderEpochFileCache): for each leader epoch the offset of its first record,
// persisted in the partition's leader-epoch-checkpoint file. Followers use it to
// find where their log diverges from the leader's (KIP-101, KIP-279).
//
// Every change is written to the checkpoint file (fsynced, then renamed
// over) before it is visible in memory, so the cache never answers from
// entries a restart would not see, with one exception: AssignDeferred, the
// start of a new epoch, is in memory until Persist or Checkpoint writes it.
// Its owner writes it before the epoch's records become part of what a
// restart trusts (a log's recovery point), so a restart that does not see
// the entry recovers those records and learns the epoch from them again.
package epoch

import (
	"fmt"
	"sort"
	"sync"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/vfs"
)

// Undefined is returned for an epoch or offset the cache cannot answer.
const Undefined = -1

// Cache is safe for concurrent use.
// Invariant: entries are strictly increasing in both Epoch and StartOffset.
type Cache struct {
	fsys       vfs.FS
	path       string
	syncWrites bool

	// fileMu orders the writers of the file; a writer takes it before mu.
	// Checkpoint holds only fileMu while it writes and fsyncs, so readers
	// and AssignDeferred (the append path) never wait on the disk.
	fileMu sync.Mutex

	mu      sync.RWMutex
	entries []checkpoint.EpochEntry
	// dirty: entries hold an AssignDeferred the file does not have yet.
	dirty bool
	// version counts the changes to entries, so that Checkpoint can tell
	// whether what it wrote is still all there is.
	version uint64
}

// Open loads the cache from path on fsys (missing file: empty). With
// syncWrites false the file is written without fsync; the caller makes it
// durable.
func Open(fsys vfs.FS, path string, syncWrites bool) (*Cache, error) {
	entries, err := checkpoint.ReadEpochs(fsys, path)
	if err != nil {
		return nil, fmt.Errorf("epoch: load cache: %w", err)
	}
	// Kafka replays a checkpoint through assign, silently dropping entries that
	// break monotonicity; a file like that was not written by us, and a wrong
	// cache would make divergence checks truncate the wrong records.
	for i := 1; i < len(entries); i++ {
		prev, e := entries[i-1], entries[i]
		if e.Epoch <= prev.Epoch || e.StartOffset <= prev.StartOffset {
			return nil, fmt.Errorf("epoch: load cache: %w: %s line %d: entry %d %d does not follow %d %d",
				checkpoint.ErrMalformed, path, i+3, e.Epoch, e.StartOffset, prev.Epoch, prev.StartOffset)
		}
	}
	return &Cache{fsys: fsys, path: path, syncWrites: syncWrites, entries: entries}, nil
}

// Path returns the checkpoint file's path.
func (c *Cache) Path() string { return c.path }

// Entries returns a copy of the entries, oldest first.
func (c *Cache) Entries() []checkpoint.EpochEntry {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]checkpoint.EpochEntry(nil), c.entries...)
}

// LatestEpoch returns the newest epoch, or Undefined when empty.
func (c *Cache) LatestEpoch() int32 {
	e, ok := c.LatestEntry()
	if !ok {
		return Undefined
	}
	return e.Epoch
}

// LatestEntry returns the newest entry; false when the cache is empty.
func (c *Cache) LatestEntry() (checkpoint.EpochEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return checkpoint.EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// EarliestEntry returns the oldest entry; false when the cache is empty.
func (c *Cache) EarliestEntry() (checkpoint.EpochEntry, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.entries) == 0 {
		return checkpoint.EpochEntry{}, false
	}
	return c.entries[0], true
}

// EndOffsetFor answers OffsetsForLeaderEpoch: the largest epoch <= requested
// and the start offset of the next epoch after it (logEndOffset when it is the
// latest). Requested epoch before the first entry or empty cache:
// (Undefined, Undefined).
//
// Unlike Kafka 2.1+, which answers (requested, first start offset) for an epoch
// older than the cache, this answers Undefined: the records of that epoch are
// gone, and the caller falls back to the log start offset.
func (c *Cache) EndOffsetFor(requested int32, logEndOffset int64) (epoch int32, endOffset int64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	n := len(c.entries)
	if requested < 0 || n == 0 {
		return Undefined, Undefined
	}
	if requested == c.entries[n-1].Epoch {
		// The leader's current epoch is still being written: it ends at the LEO.
		return requested, logEndOffset
	}
	// next is the first entry with an epoch above requested.
	next := sort.Search(n, func(i int) bool { return c.entries[i].Epoch > requested })
	if next == 0 || next == n {
		// Older than every entry, or newer than the latest: unknown here.
		return Undefined, Undefined
	}
	return c.entries[next-1].Epoch, c.entries[next].StartOffset
}

// EpochForOffset returns the epoch that covers offset, or Undefined.
func (c *Cache) EpochForOffset(offset int64) int32 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	next := sort.Search(len(c.entries), func(i int) bool { return c.entries[i].StartOffset > offset })
	if next == 0 {
		return Undefined
	}
	return c.entries[next-1].Epoch
}
