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
// Persist (or by any other change, which writes every entry). A new leader
// records its epoch this way: an epoch that never got a record needs no
// durable entry (after a restart the broker is given a newer epoch anyway),
// and its log persists the cache before appending the epoch's first batch.
// A LeaderAndIsr that moves thousands of partitions to a new epoch then costs
// no file writes at all.
func (c *Cache) AssignDeferred(epoch int32, startOffset int64) error {
	return c.assign(epoch, startOffset, false)
}

// Persist writes the entries an AssignDeferred left in memory only.
func (c *Cache) Persist() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	return c.replace(c.entries)
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
		return nil
	}
	return c.replace(next)
}

// TruncateFromEnd removes the entries whose start offset is >= endOffset
// (after the log is truncated to endOffset).
func (c *Cache) TruncateFromEnd(endOffset int64) error {
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
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == 0 {
		return nil
	}
	return c.replace(nil)
}

// replace persists next and then makes it the cache's entries. The caller
// holds the write lock, which also orders the writers of the file. next must
// not share an array with c.entries, so a failed write changes nothing.
func (c *Cache) replace(next []checkpoint.EpochEntry) error {
	if err := checkpoint.WriteEpochs(c.path, next, c.syncWrites); err != nil {
		return fmt.Errorf("epoch: write cache: %w", err)
	}
	c.entries = next
	c.dirty = false
	return nil
}
