package logmgr

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// FlushAll flushes every online log (used by the interval flush policy and at
// shutdown), moving each recovery point to its log end offset. A dir with a
// failing log is reported on Failures.
func (m *Manager) FlushAll() error {
	dirs, byDir := m.snapshot()
	type job struct {
		dir *logDir
		log *log.Log
	}
	var jobs []job
	for d, logs := range byDir {
		for _, h := range logs {
			jobs = append(jobs, job{d, h.log})
		}
	}
	var failed errByDir
	runParallel(len(jobs), m.workers(len(dirs)), func(i int) bool {
		j := jobs[i]
		// ErrClosed: the dir went offline meanwhile, which is already handled.
		if err := j.log.Flush(); err != nil && !errors.Is(err, log.ErrClosed) {
			failed.add(j.dir, fmt.Errorf("flush %s: %w", j.log.TopicPartition(), err))
		}
		return true
	})
	return failed.report(m, "flush logs")
}

// CheckpointLogOffsets writes each online dir's recovery-point and log-start
// checkpoints; a dir that fails is returned in the map with its error.
//
// A failed dir is also reported on Failures. The dirs are written in
// parallel, each file with one buffered write and an fsync.
func (m *Manager) CheckpointLogOffsets() map[string]error {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	dirs, byDir := m.snapshot()
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, d := range dirs {
		wg.Go(func() { errs[i] = writeOffsetCheckpoints(m.fsys, d.path, byDir[d]) })
	}
	wg.Wait()
	failed := make(map[string]error)
	for i, d := range dirs {
		if errs[i] != nil {
			failed[d.path] = errs[i]
			m.reportFailure(d, errs[i])
		}
	}
	return failed
}

// checkpointDir rewrites one dir's checkpoints from its current logs (and
// future logs): a log whose truncation lowered its recovery point calls it
// before cutting anything (logOptions), as Kafka's LogManager.truncateTo
// checkpoints after the truncation. Until the file says so too, a power
// loss would make recovery trust, unread, bytes below the old recovery
// point: pages the cut tore, or unflushed records appended since.
func (m *Manager) checkpointDir(d *logDir) error {
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	dirs, byDir := m.snapshot()
	if !slices.Contains(dirs, d) {
		// Offline since the caller looked: its logs are gone from the
		// snapshot, and the files would be written empty.
		return fmt.Errorf("logmgr: checkpoint %s: %w", d.path, ErrDirOffline)
	}
	return writeOffsetCheckpoints(m.fsys, d.path, byDir[d])
}

// writeOffsetCheckpoints writes the recovery points and log start offsets of
// the logs of dir.
func writeOffsetCheckpoints(fsys vfs.FS, dir string, logs []hostedLogEntry) error {
	recoveryPoints := make(map[tp.TopicPartition]int64, len(logs))
	logStarts := make(map[tp.TopicPartition]int64, len(logs))
	for _, h := range logs {
		recoveryPoints[h.t] = h.log.RecoveryPoint()
		logStarts[h.t] = h.log.LogStartOffset()
	}
	if err := checkpoint.WriteOffsets(fsys, filepath.Join(dir, RecoveryPointCheckpoint), recoveryPoints, true); err != nil {
		return ioError("write recovery points", err)
	}
	if err := checkpoint.WriteOffsets(fsys, filepath.Join(dir, LogStartOffsetCheckpoint), logStarts, true); err != nil {
		return ioError("write log start offsets", err)
	}
	return nil
}

// Shutdown flushes and closes every log and writes the checkpoints.
//
// The logs are flushed before the checkpoints are written, so the recovery
// points written are the log end offsets and the next start recovers
// nothing. Later calls do nothing.
func (m *Manager) Shutdown() error {
	// No log is being created or deleted once this is held.
	m.createMu.Lock()
	defer m.createMu.Unlock()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()

	var errs []error
	if err := m.FlushAll(); err != nil {
		errs = append(errs, err)
	}
	for dir, err := range m.CheckpointLogOffsets() {
		errs = append(errs, fmt.Errorf("logmgr: checkpoint %s: %w", dir, err))
	}
	if len(errs) == 0 {
		// Everything is flushed and checkpointed: this life lost nothing,
		// which the next one tells the controller (PreviousBrokerEpoch),
		// unless a dir failed in it (then epoch -1 is written).
		m.mu.RLock()
		epoch := m.brokerEpoch
		m.mu.RUnlock()
		if err := m.writeBrokerState(brokerState{epoch: epoch, bootID: m.cfg.BootID, clean: true}); err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	logs := make([]*log.Log, 0, len(m.logs))
	for t, h := range m.logs {
		logs = append(logs, h.log)
		delete(m.logs, t)
	}
	for t, h := range m.futures {
		logs = append(logs, h.log)
		delete(m.futures, t)
	}
	for _, d := range m.dirs {
		d.partitions = 0
	}
	dirs := make([]string, 0, len(m.dirs))
	for _, d := range m.dirs {
		if d.online {
			dirs = append(dirs, d.path)
		}
	}
	m.mu.Unlock()
	m.closeAll(logs)
	// The logs' closing producer-state snapshots are written unsynced
	// (log.Close): one syncfs per dir makes them durable, instead of two
	// fsyncs per log. Everything else was fsynced by the closes. A failure
	// costs the next start a replay, nothing more.
	for _, d := range dirs {
		if err := m.fsys.SyncFS(d); err != nil {
			m.logger.Warn().Err(err).Str("log_dir", d).Msg("sync log dir after closing its logs")
		}
	}
	if m.removalsPending.Load() > shutdownRemovals {
		m.logger.Info().Int64("dirs", m.removalsPending.Load()).Msg("leaving deleted logs' dirs to the next start")
		m.removalsStop.Store(true)
	}
	m.removals.Wait()
	return errors.Join(errs...)
}

// HighWatermarks returns the HW of every log (future logs included) by
// online log dir, each capped at its log's recovery point: what the replica
// manager has written to each dir's replication-offset-checkpoint by
// CheckpointHighWatermarks.
//
// The cap keeps the checkpoint from claiming records that are not durable:
// with the interval and os flush policies the HW routinely runs ahead of
// the recovery point (replicas acknowledged records the page cache holds),
// and a power loss takes those records away. A HW checkpointed above them
// would survive the loss and, after a restart, count records as committed
// that this log no longer has, or that the log later fills with others.
// Records above the capped HW are not lost for it: the HW moves up again
// as soon as the leader says so. Under FlushOS only a clean shutdown moves
// the recovery point (a roll fsyncs its segment but does not move it), so
// between restarts the checkpoint keeps the HWs of the last clean start.
func (m *Manager) HighWatermarks() map[string]map[tp.TopicPartition]int64 {
	byDir := make(map[string]map[tp.TopicPartition]int64)
	for dir, logs := range m.LogsByDir() {
		hws := make(map[tp.TopicPartition]int64, len(logs))
		for t, l := range logs {
			hws[t] = min(l.HighWatermark(), l.RecoveryPoint())
		}
		byDir[dir] = hws
	}
	return byDir
}

// HighWatermarkCheckpoint is what CheckpointHighWatermarks wrote in one dir.
type HighWatermarkCheckpoint struct {
	Dir string
	// HWs are the entries written (or that failed to be).
	HWs map[tp.TopicPartition]int64
	// Err is the failure of the write, already reported on Failures.
	Err error
}

// CheckpointHighWatermarks replaces the replication-offset-checkpoint of
// each of dirs that is online with the HWs of its logs (HighWatermarks),
// in the order given (Kafka's checkpointHighWatermarks). The HWs are read
// under the lock that serializes the writers of these files, so that a
// deletion that rewrites them (checkpointRemoval) can never be overwritten
// by a checkpoint that read the deleted log. The caller takes a failed dir
// offline; the failure is also reported on Failures.
func (m *Manager) CheckpointHighWatermarks(dirs []string) []HighWatermarkCheckpoint {
	m.hwMu.Lock()
	defer m.hwMu.Unlock()
	byDir := m.HighWatermarks()
	out := make([]HighWatermarkCheckpoint, 0, len(dirs))
	for _, dir := range dirs {
		hws, ok := byDir[dir]
		if !ok {
			continue // offline
		}
		out = append(out, HighWatermarkCheckpoint{Dir: dir, HWs: hws, Err: m.writeHighWatermarksLocked(dir, hws)})
	}
	return out
}

// WriteHighWatermarks replaces dir's replication-offset-checkpoint with hws,
// given by the caller: for tests and benchmarks, which remove no log
// meanwhile. A replica manager uses CheckpointHighWatermarks, which reads
// the HWs under the lock: hws read before a log removal and written after
// it would bring the removed log's entry back.
func (m *Manager) WriteHighWatermarks(dir string, hws map[tp.TopicPartition]int64) error {
	m.hwMu.Lock()
	defer m.hwMu.Unlock()
	return m.writeHighWatermarksLocked(dir, hws)
}

// writeHighWatermarksLocked replaces dir's replication-offset-checkpoint
// with hws, which the caller read under hwMu, held.
func (m *Manager) writeHighWatermarksLocked(dir string, hws map[tp.TopicPartition]int64) error {
	if err := checkpoint.WriteOffsets(m.fsys, filepath.Join(dir, ReplicationOffsetCheckpoint), hws, true); err != nil {
		err = ioError("write "+ReplicationOffsetCheckpoint, err)
		m.ReportFailure(dir, err)
		return err
	}
	return nil
}

// rewriteHighWatermarks replaces d's replication-offset-checkpoint with the
// HWs of the logs d holds now.
func (m *Manager) rewriteHighWatermarks(d *logDir) error {
	m.hwMu.Lock()
	defer m.hwMu.Unlock()
	hws, ok := m.HighWatermarks()[d.path]
	if !ok {
		return fmt.Errorf("logmgr: rewrite %s in %s: %w", ReplicationOffsetCheckpoint, d.path, ErrDirOffline)
	}
	return m.writeHighWatermarksLocked(d.path, hws)
}

// checkpointRemoval rewrites every checkpoint of d from the logs it holds
// now, once a log was taken out of it (deleted, set aside, moved away or
// replaced), before the removal is answered (Kafka's LogManager.asyncDelete
// checkpoints the dir's recovery points and log start offsets at once).
// The files are keyed by partition name, not topic ID: an entry left for
// the removed log would be given to the next log created under the name in
// this dir. A recovery point would make recovery trust the new log's
// unflushed, possibly torn, tail unread; a log start would hide its first
// records; and a HW (min(entry, LEO) after a power cut) would count as
// committed records the new log appended but never committed. The caller
// holds createMu, so no log of the name is created in between. Costs one
// fsynced write of each of the three files per call.
func (m *Manager) checkpointRemoval(d *logDir) error {
	if err := m.checkpointDir(d); err != nil {
		return err
	}
	return m.rewriteHighWatermarks(d)
}

// ReadHighWatermarks reads dir's replication-offset-checkpoint (missing: none).
func (m *Manager) ReadHighWatermarks(dir string) (map[tp.TopicPartition]int64, error) {
	return checkpoint.ReadOffsets(m.fsys, filepath.Join(dir, ReplicationOffsetCheckpoint))
}

// LoadHighWatermarks reads every online dir's replication-offset-checkpoint
// and gives each log in the dir, future logs included, its HW (clamped to
// the log). A file that claims more than a log holds now (a truncation or a
// power loss took the records after the HW was written) or names a
// partition with no log in the dir is rewritten at once: it would otherwise
// go on claiming those offsets, and after the next restart count as
// committed whatever records had been appended there since. It returns the
// dirs whose file could not be read or rewritten, to be taken offline.
func (m *Manager) LoadHighWatermarks() map[string]error {
	failed := make(map[string]error)
	for dir, logs := range m.LogsByDir() {
		hws, err := m.ReadHighWatermarks(dir)
		if err != nil {
			failed[dir] = err
			continue
		}
		stale := false
		for t, hw := range hws {
			l, ok := logs[t]
			if !ok || l.UpdateHighWatermark(hw) < hw {
				stale = true
			}
		}
		for t, l := range logs {
			if _, ok := hws[t]; !ok {
				l.UpdateHighWatermark(0)
			}
		}
		if !stale {
			continue
		}
		m.hwMu.Lock()
		err = m.writeHighWatermarksLocked(dir, m.HighWatermarks()[dir])
		m.hwMu.Unlock()
		if err != nil {
			failed[dir] = fmt.Errorf("logmgr: rewrite stale HW checkpoint: %w", err)
		}
	}
	return failed
}
