package logmgr

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// ErrDirNotFound: a log dir named by a caller is not one of the configured dirs.
var ErrDirNotFound = errors.New("logmgr: not a configured log dir")

// A future log is the copy of a partition being moved to another log dir by
// alter log dirs (Kafka's future replica). It lives in
// "<dir>/<topic>-<partition>.<id>-future" until it has caught up with the
// current log; ReplaceCurrentWithFutureLog then swaps it in.

// parseFutureDirName returns the partition of a "<topic>-<partition>.<id>-future" name.
func parseFutureDirName(name string) (tp.TopicPartition, error) {
	base := strings.TrimSuffix(name, FutureDirSuffix)
	i := strings.LastIndexByte(base, '.')
	if i <= 0 {
		return tp.TopicPartition{}, fmt.Errorf("future dir %q: want topic-partition.id-future", name)
	}
	return tp.ParseDirName(base[:i])
}

// futureDirName names a new future log's dir.
func futureDirName(t tp.TopicPartition) string {
	return t.String() + "." + uniqueID() + FutureDirSuffix
}

// FutureLog returns the partition's future log, if a move is in progress.
func (m *Manager) FutureLog(t tp.TopicPartition) (*log.Log, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.futures[t]
	return h.log, ok
}

// FutureDirOf returns the log dir the partition is being moved to.
func (m *Manager) FutureDirOf(t tp.TopicPartition) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.futures[t]
	if !ok {
		return "", false
	}
	return h.dir.path, true
}

// FutureLogs returns every future log, by partition.
func (m *Manager) FutureLogs() map[tp.TopicPartition]*log.Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[tp.TopicPartition]*log.Log, len(m.futures))
	for t, h := range m.futures {
		out[t] = h.log
	}
	return out
}

// GetOrCreateFutureLog returns the partition's future log in dir, creating an
// empty one when there is none. dir must be a configured online dir
// (ErrDirNotFound, ErrDirOffline) other than the one holding the current
// log; a future log already in another dir must be deleted first.
func (m *Manager) GetOrCreateFutureLog(t tp.TopicPartition, dir string) (*log.Log, error) {
	if err := tp.ValidateTopic(t.Topic); err != nil || t.Partition < 0 {
		return nil, fmt.Errorf("logmgr: create future log %s: illegal partition name", t)
	}
	if err := tp.ValidateFutureDirName(t); err != nil {
		return nil, fmt.Errorf("logmgr: create future log: %w (%w)", err, log.ErrNameTooLong)
	}
	m.createMu.Lock()
	defer m.createMu.Unlock()
	m.mu.RLock()
	d := m.findDirLocked(dir)
	cur, hasCur := m.logs[t]
	fut, hasFut := m.futures[t]
	closed := m.closed
	m.mu.RUnlock()
	switch {
	case closed:
		return nil, fmt.Errorf("logmgr: create future log %s: %w", t, log.ErrClosed)
	case d == nil:
		return nil, fmt.Errorf("logmgr: create future log %s in %s: %w", t, dir, ErrDirNotFound)
	case !d.online:
		return nil, fmt.Errorf("logmgr: create future log %s in %s: %w", t, dir, ErrDirOffline)
	case hasCur && cur.dir == d:
		return nil, fmt.Errorf("logmgr: create future log %s: the log is already in %s", t, d.path)
	case hasFut && fut.dir == d:
		return fut.log, nil
	case hasFut:
		return nil, fmt.Errorf("logmgr: create future log %s in %s: a future log is in %s", t, d.path, fut.dir.path)
	}
	l, err := m.openNewLog(d, t, futureDirName(t), "future log", cur.topicID, true, m.futures, false)
	if err != nil {
		return nil, err
	}
	m.logger.Info().Str("partition", t.String()).Str("log_dir", d.path).Msg("created future log")
	return l, nil
}

// DeleteFutureLog closes and removes the partition's future log (an aborted
// or stopped move), and rewrites its dir's checkpoints without it
// (checkpointRemoval). Deleting a partition without one does nothing.
func (m *Manager) DeleteFutureLog(t tp.TopicPartition) error {
	m.createMu.Lock()
	defer m.createMu.Unlock()
	m.mu.Lock()
	h, ok := m.futures[t]
	delete(m.futures, t)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	_ = h.log.Close()
	deleted := deletedDirPath(h.dir.path, t)
	if err := m.fsys.Rename(h.log.Dir(), deleted); err != nil {
		return m.deleteFailed(h.dir, t, err)
	}
	if err := m.fsys.SyncDir(h.dir.path); err != nil {
		return m.deleteFailed(h.dir, t, err)
	}
	m.removeInBackground([]string{deleted})
	if err := m.checkpointRemoval(h.dir); err != nil {
		return m.deleteFailed(h.dir, t, err)
	}
	m.logger.Info().Str("partition", t.String()).Str("log_dir", h.dir.path).Msg("deleted future log")
	return nil
}

// ReplaceCurrentWithFutureLog swaps the future log in as the partition's log
// (Kafka's LogManager.replaceCurrentWithFutureLog) and returns it, reopened,
// with highWatermark as its HW. The caller must guarantee that nothing writes
// to either log meanwhile and that the future log holds everything the
// current one does (same log end offset).
//
// Order, chosen so that a crash at any point loses nothing: both logs are
// flushed and closed; the current dir is renamed to "<name>.<id>-delete" and
// its parent fsynced; the future dir is renamed to "<name>" and its parent
// fsynced. A crash between the two renames leaves a future log with no
// current log, which Open completes by renaming the future dir (see
// promoteOrphanFutures). The old log is removed in the background.
//
// On error the partition may have no log left (the caller takes it offline);
// the failing dir is reported on Failures.
func (m *Manager) ReplaceCurrentWithFutureLog(t tp.TopicPartition, highWatermark int64) (*log.Log, error) {
	m.createMu.Lock()
	defer m.createMu.Unlock()
	m.mu.Lock()
	cur, hasCur := m.logs[t]
	fut, hasFut := m.futures[t]
	if !hasCur || !hasFut {
		m.mu.Unlock()
		return nil, fmt.Errorf("logmgr: replace %s with its future log: current %v, future %v", t, hasCur, hasFut)
	}
	for _, h := range []hostedLog{fut, cur} {
		if err := h.log.Failed(); err != nil {
			// Never swap in a log that lost writes, nor away from one
			// whose failure is its dir's to handle: both stay as they are.
			m.mu.Unlock()
			return nil, fmt.Errorf("logmgr: replace %s with its future log: %w", t, err)
		}
	}
	// From here the partition is in neither map until the swap is done, so
	// checkpoints and flushes leave both logs alone.
	delete(m.logs, t)
	delete(m.futures, t)
	cur.dir.partitions--
	m.mu.Unlock()

	// Never below the current log's: records deleted from it must not come
	// back with the future log (the partition raises the future's first).
	logStart := max(fut.log.LogStartOffset(), cur.log.LogStartOffset())
	if err := fut.log.Close(); err != nil {
		return nil, m.replaceFailed(fut.dir, t, "close future log", err)
	}
	if err := cur.log.Close(); err != nil {
		return nil, m.replaceFailed(cur.dir, t, "close current log", err)
	}
	deleted := deletedDirPath(cur.dir.path, t)
	if err := m.fsys.Rename(cur.log.Dir(), deleted); err != nil {
		return nil, m.replaceFailed(cur.dir, t, "rename current log", err)
	}
	if err := m.fsys.SyncDir(cur.dir.path); err != nil {
		return nil, m.replaceFailed(cur.dir, t, "sync current log dir", err)
	}
	final := filepath.Join(fut.dir.path, t.String())
	if err := m.fsys.Rename(fut.log.Dir(), final); err != nil {
		return nil, m.replaceFailed(fut.dir, t, "rename future log", err)
	}
	if err := m.fsys.SyncDir(fut.dir.path); err != nil {
		return nil, m.replaceFailed(fut.dir, t, "sync future log dir", err)
	}
	opts := m.logOptions(fut.dir, final, t)
	opts.RecoveryPoint, opts.LogStartOffset = fut.log.RecoveryPoint(), logStart
	l, err := log.Open(opts)
	if err != nil {
		return nil, m.replaceFailed(fut.dir, t, "reopen moved log", err)
	}
	l.UpdateHighWatermark(highWatermark)
	m.mu.Lock()
	if !fut.dir.online {
		m.mu.Unlock()
		_ = l.Close()
		return nil, fmt.Errorf("logmgr: replace %s with its future log: %w", t, ErrDirOffline)
	}
	m.logs[t] = hostedLog{log: l, dir: fut.dir, topicID: fut.topicID}
	fut.dir.partitions++
	m.mu.Unlock()
	m.removeInBackground([]string{deleted})
	for _, d := range []*logDir{cur.dir, fut.dir} {
		if err := m.checkpointRemoval(d); err != nil {
			m.reportFailure(d, err)
		}
	}
	m.logger.Info().Str("partition", t.String()).Str("from", cur.dir.path).Str("to", fut.dir.path).Msg("moved log to its new dir")
	return l, nil
}

func (m *Manager) replaceFailed(d *logDir, t tp.TopicPartition, op string, err error) error {
	err = ioError(op+" "+t.String(), err)
	m.reportFailure(d, err)
	return err
}

// promoteOrphanFutures completes a swap a crash interrupted: a future
// log whose partition has no current log in any dir (the current dir was
// already renamed to "-delete") becomes the current log, renamed to
// "<name>". It runs only when every dir is online: a current log in an
// offline dir may exist, and then the future is still the copy. Returns the
// future logs left as futures.
func (m *Manager) promoteOrphanFutures(futures map[tp.TopicPartition]hostedLog) (map[tp.TopicPartition]hostedLog, error) {
	for _, d := range m.dirs {
		if !d.online {
			return futures, nil
		}
	}
	for t, h := range futures {
		if _, ok := m.logs[t]; ok {
			continue
		}
		recoveryPoint, logStart := h.log.RecoveryPoint(), h.log.LogStartOffset()
		if err := h.log.Close(); err != nil {
			return nil, fmt.Errorf("logmgr: promote future log %s: %w", t, err)
		}
		final := filepath.Join(h.dir.path, t.String())
		if err := m.fsys.Rename(h.log.Dir(), final); err != nil {
			return nil, fmt.Errorf("logmgr: promote future log %s: %w", t, err)
		}
		if err := m.fsys.SyncDir(h.dir.path); err != nil {
			return nil, fmt.Errorf("logmgr: promote future log %s: %w", t, err)
		}
		opts := m.logOptions(h.dir, final, t)
		opts.RecoveryPoint, opts.LogStartOffset = recoveryPoint, logStart
		l, err := log.Open(opts)
		if err != nil {
			return nil, fmt.Errorf("logmgr: promote future log %s: %w", t, err)
		}
		m.logger.Warn().Str("partition", t.String()).Str("log_dir", h.dir.path).
			Msg("completed a log dir move interrupted by a crash: the future log is now the current log")
		m.logs[t] = hostedLog{log: l, dir: h.dir, topicID: h.topicID}
		h.dir.partitions++
		delete(futures, t)
	}
	return futures, nil
}
