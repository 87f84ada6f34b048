package log

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/epoch"
	"github.com/replicad/replicad/core/log/producerstate"
	"github.com/replicad/replicad/core/vfs"
)

// Open opens or creates the log in opts.Dir and recovers every segment past
// the recovery point, truncating a torn or corrupt tail.
func Open(opts Options) (*Log, error) {
	l, err := open(opts)
	if err != nil && outOfDescriptors(err) {
		// Opening changed nothing that a later Open does not redo: no
		// fault of the disk.
		err = fmt.Errorf("%w: %w", ErrFileLimit, err)
	}
	return l, err
}

func open(opts Options) (*Log, error) {
	cfg, err := opts.Config.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.LogStartOffset < 0 {
		return nil, fmt.Errorf("log: negative log start offset %d", opts.LogStartOffset)
	}
	fsys := vfs.Or(opts.FS)
	created, err := makeDir(fsys, opts.Dir, opts.SyncMetadata)
	if err != nil {
		return nil, err
	}
	// The cache fsyncs its own writes (truncations, recovery, the flush's
	// Checkpoint); appends and MaybeAssignEpochStartOffset record new
	// epochs in memory only, for the next flush to write. SyncMetadata
	// concerns only the files of creation.
	epochPath := filepath.Join(opts.Dir, EpochCheckpointFile)
	cache, err := epoch.Open(fsys, epochPath, true)
	if errors.Is(err, checkpoint.ErrMalformed) {
		// Unlike a HW checkpoint, this one can be rebuilt without loss:
		// every batch carries its epoch. Rather than take the whole log dir
		// offline for one partition's cache, recover this partition from
		// its first segment, which assigns the epochs again.
		corrupt := epochPath + ".corrupt"
		opts.Logger.Warn().Err(err).Str("dir", opts.Dir).Str("kept_as", corrupt).
			Msg("leader-epoch-checkpoint does not parse: rebuilding it from the log's batches")
		if rerr := fsys.Rename(epochPath, corrupt); rerr != nil {
			return nil, storageError(rerr, "set aside %s", epochPath)
		}
		opts.RecoveryPoint = 0
		cache, err = epoch.Open(fsys, epochPath, true)
	}
	if err != nil {
		return nil, storageError(err, "open %s", opts.Dir)
	}
	l := &Log{
		fsys:   fsys,
		cache:  opts.FileCache,
		dir:    opts.Dir,
		tp:     opts.TopicPartition,
		cfg:    cfg,
		logger: opts.Logger,
		epochs: cache,

		onStorageError:         opts.OnStorageError,
		onRecoveryPointLowered: opts.OnRecoveryPointLowered,
		onProducerStateRebuilt: opts.OnProducerStateRebuilt,
		producers:              producerstate.NewManager(cfg.MaxProducers),
		lastSnapshot:           -1,
	}
	if created {
		err = l.startEmptyAt(opts.LogStartOffset, opts.SyncMetadata)
	} else {
		err = l.load(opts)
		if err == nil {
			// From the newest sound snapshot at or below the recovered
			// log end, and the batches after it.
			if err = l.rebuildProducerStateLocked(""); err != nil {
				err = storageError(err, "rebuild producer state")
			}
		}
	}
	if err != nil {
		if segs := l.segments.Load(); segs != nil {
			closeSegments(*segs)
		}
		return nil, err
	}
	return l, nil
}

// makeDir creates the partition directory; created is false when it existed.
func makeDir(fsys vfs.FS, dir string, syncMetadata bool) (created bool, err error) {
	err = fsys.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) {
		err = fsys.MkdirAll(dir, 0o755)
	}
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil && NameTooLong(err) {
		// The name came with a request: nothing was made, the disk is fine.
		return false, fmt.Errorf("%w: create dir: %w", ErrNameTooLong, err)
	}
	if err != nil {
		return false, storageError(err, "create dir")
	}
	if syncMetadata {
		if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
			return false, storageError(err, "create dir")
		}
	}
	return true, nil
}

// load opens the segments found in the directory and recovers them.
func (l *Log) load(opts Options) error {
	segs, indexValid, err := l.openSegments()
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		// Every segment is gone (a full truncation cut before its new
		// segment): so is every record the cache could describe. The log
		// restarts no lower than its recovery point: the offsets below it
		// were durable, and the truncation was taking the log past them
		// (the log-start checkpoint, written after the recovery points,
		// may not say so yet).
		if err := l.epochs.Clear(); err != nil {
			return storageError(err, "clear epoch cache")
		}
		return l.startEmptyAt(max(opts.LogStartOffset, opts.RecoveryPoint), opts.SyncMetadata)
	}
	kept, logEndOffset, damage, err := l.recoverSegments(segs, indexValid, opts.RecoveryPoint)
	if err != nil {
		closeSegments(segs)
		return err
	}
	l.setSegments(kept)
	logStartOffset := max(opts.LogStartOffset, kept[0].baseOffset)
	if damage != nil {
		return l.openDamaged(damage, logStartOffset)
	}
	if logEndOffset < logStartOffset {
		// Kafka does the same: the records up to the log start were deleted
		// (or never came back from the crash); the log restarts empty there.
		l.logger.Warn().Str("dir", l.dir).Int64("log_end_offset", logEndOffset).
			Int64("log_start_offset", logStartOffset).Msg("log ends before its start: deleting every segment")
		return l.truncateFullyLocked(logStartOffset)
	}
	// The cache may hold epochs whose records were lost with the tail.
	if err := l.epochs.TruncateFromEnd(logEndOffset); err != nil {
		return storageError(err, "trim epoch cache to %d", logEndOffset)
	}
	l.logEndOffset.Store(logEndOffset)
	l.logStartOffset.Store(logStartOffset)
	l.highWatermark.Store(logStartOffset)
	l.recoveryPoint.Store(min(max(opts.RecoveryPoint, kept[0].baseOffset), logEndOffset))
	// A crash after IncrementLogStartOffset checkpointed a raised log
	// start, and before it trimmed the epochs and deleted the segments
	// below it, left both: finish its work (Kafka's LogLoader trims the
	// epochs from the log start too).
	if err := l.epochs.TruncateFromStart(logStartOffset); err != nil {
		return storageError(err, "trim epoch cache from %d", logStartOffset)
	}
	return l.deleteSegmentsBelowStartLocked(l.segmentsBelowStartLocked())
}

// openDamaged opens the log damaged at d (see Damaged): it ends at the
// damage, every byte stays on disk, and the recovery point stays where it
// was, above the LEO, so that the damage is found below it again.
func (l *Log) openDamaged(d *Damage, logStartOffset int64) error {
	end := max(d.Offset, logStartOffset)
	// The epochs of the records past the damage go: until the repair cuts
	// them off, the log ends at the damage for everyone, divergence checks
	// included.
	if err := l.epochs.TruncateFromEnd(end); err != nil {
		return storageError(err, "trim epoch cache to %d", end)
	}
	// Recovery rebuilt the damaged segment's index up to the damage, and a
	// restart would trust such an index, below the recovery point, without
	// reading the segment: it goes, durably, so that every restart finds
	// the damage again until the repair.
	if err := d.seg.index.discard(); err != nil {
		return storageError(err, "discard index of damaged segment %d", d.seg.baseOffset)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return storageError(err, "discard index of damaged segment %d", d.seg.baseOffset)
	}
	l.damage.Store(d)
	l.logEndOffset.Store(end)
	l.logStartOffset.Store(logStartOffset)
	l.highWatermark.Store(logStartOffset)
	l.recoveryPoint.Store(max(d.RecoveryPoint, end))
	l.logger.Error().Err(d.Cause).Str("dir", l.dir).Int64("offset", d.Offset).Int64("recovery_point", d.RecoveryPoint).
		Msg("log damaged below its recovery point: it serves the records before the damage and keeps the rest on disk; as a follower it is repaired from the leader, and it refuses leadership")
	return nil
}

// startEmptyAt gives a log without segments its first, empty one.
func (l *Log) startEmptyAt(offset int64, syncMetadata bool) error {
	seg, err := createSegment(l.fsys, l.cache, l.dir, offset)
	if err != nil {
		return storageError(err, "create log")
	}
	l.setSegments([]*segment{seg})
	if syncMetadata {
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return storageError(err, "create log")
		}
	}
	l.logEndOffset.Store(offset)
	l.logStartOffset.Store(offset)
	l.highWatermark.Store(offset)
	l.recoveryPoint.Store(offset)
	return nil
}

// Close flushes and closes the files. Closing a closed log does nothing.
func (l *Log) Close() error { return l.shutdown(true) }

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	closeErr := l.shutdown(false) // the data is going away: no point making it durable
	if err := l.fsys.RemoveAll(l.dir); err != nil {
		return storageError(err, "delete %s", l.dir)
	}
	return closeErr
}

// shutdown closes every file, first fsyncing what is not yet durable when flush is set.
func (l *Log) shutdown(flush bool) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Swap(true) {
		return nil
	}
	segs := l.segmentList()
	var errs []error
	// A failed log fsyncs nothing more: its recovery point stays where the
	// last good fsync left it (see fail).
	if flush && l.failed() == nil {
		if err := l.epochs.Persist(); err != nil {
			errs = append(errs, err)
		}
		if l.dirDirty.Load() {
			if err := l.fsys.SyncDir(l.dir); err != nil {
				errs = append(errs, err)
			} else {
				l.dirDirty.Store(false)
			}
		}
		// Segments before the recovery point's are durable, but recovery
		// may have rebuilt an index anywhere.
		unsynced := len(segs)
		if l.recoveryPoint.Load() < l.logEndOffset.Load() {
			unsynced = segmentIndex(segs, l.recoveryPoint.Load())
		}
		for i, s := range segs {
			var err error
			if i >= unsynced {
				err = s.sync()
			} else {
				err = s.index.sync()
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) == 0 {
			// Raised only: a damaged log's stays above its LEO (Damaged).
			l.recoveryPoint.Store(max(l.recoveryPoint.Load(), l.logEndOffset.Load()))
			// The state at the log end, every segment durable: a clean
			// restart loads it and replays nothing (Kafka snapshots at
			// shutdown too).
			l.snapshotAtCloseLocked()
		}
	}
	for _, s := range segs {
		if err := s.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return storageError(err, "close %s", l.dir)
	}
	if flush {
		// Nothing since the failure was made durable: a Close that is to
		// leave the log complete on disk did not.
		return l.failed()
	}
	return nil
}
