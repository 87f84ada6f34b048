package epoch

import (
	"fmt"
	"slices"

	"github.com/replicad/replicad/core/checkpoint"
)

// Assign records that epoch starts at startOffset. An epoch not newer than the
// latest, or a start offset below the latest's, is ignored when it is the same
// entry, and otherwise replaces the conflicting entries (Kafka's assign).
// The checkpoint file is rewritten when the entries change.
//
// As in Kafka, the latest epoch assigned again at a later offset is a no-op
// (its first record is already known), and at an earlier offset it moves the
// epoch's start back.
func (c *Cache) Assign(epoch int32, startOffset int64) error {
	return c.assign(epoch, startOffset, true)
}

// AssignDeferred is Assign in memory only: the file is written by the next
// Persist or Checkpoint (or by any other change, which writes every entry).
// A new leader records its epoch this way, and a log the epoch of a batch
// it appends: an epoch that never got a record needs no durable entry
// (after a restart the broker is given a newer epoch anyway), and the log
// checkpoints the cache before its recovery point passes the epoch's first
// batch. A LeaderAndIsr that moves thousands of partitions to a new epoch,
// and the first produce to each, then cost no file writes at all.
func (c *Cache) AssignDeferred(epoch int32, startOffset int64) error {
	return c.assign(epoch, startOffset, false)
}

// Persist writes the entries an AssignDeferred left in memory only.
func (c *Cache) Persist() error {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	return c.replace(c.entries)
}

// Checkpoint is Persist without holding the cache's lock during the write
// and its fsyncs: readers and AssignDeferred go on meanwhile. It writes the
// entries as of its start as every write does (with Open's syncWrites, as
// a log opens it: temporary file fsynced, renamed over, directory fsynced;
// never a rename of unsynced data, which a power loss could turn into an
// empty file). An AssignDeferred that lands meanwhile
// leaves the cache dirty for the next call.
//
// A log calls it before its recovery point passes the batches of a new
// epoch, so the entry is durable no later than its records, while the
// append that starts the epoch writes nothing (a failover moving a thousand
// leaderships would otherwise put a thousand fsyncs under log locks in the
// produce path). Kafka fsyncs at assign instead; records above the recovery
// point get their epochs again from their batches at recovery, so until the
// flush nothing needs the file.
func (c *Cache) Checkpoint() error {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.mu.RLock()
	if !c.dirty {
		c.mu.RUnlock()
		return nil
	}
	version, entries := c.version, slices.Clone(c.entries)
	c.mu.RUnlock()
	if err := checkpoint.WriteEpochs(c.fsys, c.path, entries, c.syncWrites); err != nil {
		return fmt.Errorf("epoch: write cache: %w", err)
	}
	c.mu.Lock()
	if c.version == version {
		c.dirty = false
	}
	c.mu.Unlock()
	return nil
}

// Dirty reports whether entries await Persist.
func (c *Cache) Dirty() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.dirty
}

func (c *Cache) assign(epoch int32, startOffset int64, persist bool) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("epoch: assign epoch %d at offset %d: negative", epoch, startOffset)
	}
	if persist {
		c.fileMu.Lock()
		defer c.fileMu.Unlock()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.entries); n > 0 {
		last := c.entries[n-1]
		if epoch == last.Epoch && startOffset >= last.StartOffset {
			return nil
		}
	}
	// Drop every entry that would break monotonicity with the new one: on a
	// follower these are epochs the new leader's log does not have.
	keep := len(c.entries)
	for keep > 0 {
		e := c.entries[keep-1]
		if e.Epoch < epoch && e.StartOffset < startOffset {
			break
		}
		keep--
	}
	next := append(slices.Clip(c.entries[:keep]), checkpoint.EpochEntry{Epoch: epoch, StartOffset: startOffset})
	if !persist {
		c.entries = next
		c.dirty = true
		c.version++
		return nil
	}
	return c.replace(next)
}

// TruncateFromEnd removes the entries whose start offset is >= endOffset
// (after the log is truncated to endOffset).
func (c *Cache) TruncateFromEnd(endOffset int64) error {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := len(c.entries)
	for keep > 0 && c.entries[keep-1].StartOffset >= endOffset {
		keep--
	}
	if endOffset < 0 || keep == len(c.entries) {
		return nil
	}
	return c.replace(slices.Clone(c.entries[:keep]))
}

// TruncateFromStart removes entries wholly below startOffset and moves the
// first remaining entry's start up to startOffset (after log start moves).
//
// The entry covering startOffset is kept, so the epoch of the first record
// still in the log stays known.
func (c *Cache) TruncateFromStart(startOffset int64) error {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	// covering is the last entry starting at or before startOffset.
	covering := -1
	for i, e := range c.entries {
		if e.StartOffset > startOffset {
			break
		}
		covering = i
	}
	if covering < 0 || (covering == 0 && c.entries[0].StartOffset == startOffset) {
		return nil
	}
	next := slices.Clone(c.entries[covering:])
	next[0].StartOffset = startOffset
	return c.replace(next)
}

// Clear removes every entry (a fully truncated log).
func (c *Cache) Clear() error {
	c.fileMu.Lock()
	defer c.fileMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return nil
	}
	return c.replace(nil)
}

// replace persists next and then makes it the cache's entries. The caller
// holds fileMu (ordering the writers of the file) and the write lock. next
// must not share an array with c.entries, so a failed write changes nothing.
func (c *Cache) replace(next []checkpoint.EpochEntry) error {
	if err := checkpoint.WriteEpochs(c.fsys, c.path, next, c.syncWrites); err != nil {
		return fmt.Errorf("epoch: write cache: %w", err)
	}
	c.entries = next
	c.dirty = false
	c.version++
	return nil
}
