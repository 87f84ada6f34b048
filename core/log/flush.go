package log

// Flush fsyncs up to the LEO and moves the recovery point there. The epoch
// entries of those records are written by the same flush (syncOnce); an
// epoch without records needs no durable entry.
func (l *Log) Flush() error {
	if l.closed.Load() {
		return ErrClosed
	}
	if err := l.failed(); err != nil {
		return err
	}
	return l.flushTo(l.logEndOffset.Load())
}

// flushTo returns once everything below target is fsynced (the recovery
// point has reached it), or target was truncated away.
//
// Group commit: fsyncs run one at a time under syncMu, outside mu, so
// appends keep writing while one is in progress. Each fsync covers the whole
// LEO as of its start; an appender that queued behind it finds its bytes
// already durable and returns without an fsync of its own.
func (l *Log) flushTo(target int64) error {
	for l.recoveryPoint.Load() < target {
		synced, err := l.syncOnce(target)
		if err != nil {
			return err
		}
		if synced < target && l.logEndOffset.Load() < target {
			return nil // truncated: what is left of ours is durable
		}
	}
	return nil
}

// syncOnce fsyncs the segments from the recovery point to the LEO, unless
// an fsync that finished while we waited already passed target. It returns
// the offset everything below which is durable.
func (l *Log) syncOnce(target int64) (int64, error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if rp := l.recoveryPoint.Load(); rp >= target {
		return rp, nil
	}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	// No truncation runs until we are done: every truncation holds syncMu.
	end := l.logEndOffset.Load()
	segs := l.segmentList()
	segs = segs[segmentIndex(segs, l.recoveryPoint.Load()):]
	l.mu.Unlock()

	var syncErr error
	if l.dirDirty.Swap(false) {
		if syncErr = l.fsys.SyncDir(l.dir); syncErr != nil {
			l.dirDirty.Store(true)
		}
	}
	for _, s := range segs {
		if syncErr != nil {
			break
		}
		syncErr = s.sync()
	}
	// The epoch entries of the batches below end, recorded in memory by the
	// appends, reach the leader-epoch-checkpoint durably before the
	// recovery point passes those batches, and after the segments (so a
	// truncation of them is durable before an entry above it). The cache
	// writes outside mu: the appends go on meanwhile.
	if syncErr == nil {
		syncErr = l.epochs.Checkpoint()
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if syncErr != nil {
		// The recovery point stays: a failed fsync fails the log (fail).
		return 0, l.ioError(syncErr, "flush")
	}
	if err := l.failed(); err != nil {
		// Something else failed the log meanwhile (a write, a read): its
		// recovery point moves no more.
		return 0, err
	}
	l.recoveryPoint.Store(max(l.recoveryPoint.Load(), end))
	if l.recoveryPoint.Load() >= l.epochFloor {
		l.epochFloor = 0
	}
	return end, nil
}
