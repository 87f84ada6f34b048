package logmgr

import (
	"cmp"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/replicad/replicad/core/tp"
)

// DeleteLogs closes and removes the logs of ts (a StopReplica with delete,
// a topic deletion of thousands of partitions) and returns the error of
// each one whose log could not be deleted; a partition without a log is
// not an error and changes nothing.
//
// As in Kafka (LogManager.asyncDelete), each partition dir is renamed to
// "<name>.<id>-delete", which Open never loads, so a crash mid-removal
// cannot bring back half a log; the removal itself runs in the background,
// a few at a time. The work is batched per log dir, which is what makes a
// deletion of 10,000 partitions take seconds rather than half an hour:
// the logs are closed without flushing (their data is going away), the
// renames are made durable by one fsync of the dir, and the dir's
// recovery-point, log-start and HW checkpoints are rewritten once without
// the removed partitions (checkpointRemoval), so a log created again under
// the same name does not inherit their offsets. Deleting one at a time
// cost one fsync per log plus three checkpoint files rewritten, each
// naming every log of the dir: quadratic in the dir's partitions.
//
// A crash before a dir's fsync may undo some renames: those logs come back
// at the next start, still of the deleted topic's ID, and the controller,
// which keeps the deletion pending until every replica has answered,
// deletes them again. A crash after it leaves only "-delete" dirs, removed
// at the next start, and checkpoint entries naming logs that are gone,
// rewritten at the next start (rewriteStaleCheckpoints).
func (m *Manager) DeleteLogs(ts []tp.TopicPartition) map[tp.TopicPartition]error {
	if len(ts) == 0 {
		return nil
	}
	start := time.Now()
	m.createMu.Lock()
	defer m.createMu.Unlock()
	type doomed struct {
		t tp.TopicPartition
		h hostedLog
	}
	byDir := map[*logDir][]doomed{}
	for _, t := range ts {
		if h, ok := m.forgetLog(t); ok {
			byDir[h.dir] = append(byDir[h.dir], doomed{t, h})
		}
	}
	if len(byDir) == 0 {
		return nil
	}
	dirs := make([]*logDir, 0, len(byDir))
	for d := range byDir {
		dirs = append(dirs, d)
	}
	slices.SortFunc(dirs, func(a, b *logDir) int { return cmp.Compare(a.path, b.path) })

	failed := map[tp.TopicPartition]error{}
	deleted := 0
	for _, d := range dirs {
		logs := byDir[d]
		dirStart := time.Now()
		// The data is being removed: nothing needs to be durable, and a
		// close error loses nothing.
		runParallel(len(logs), m.workers(1), func(i int) bool {
			_ = logs[i].h.log.Abandon()
			return true
		})
		var renamed []string
		var err error
		for i, l := range logs {
			to := deletedDirPath(d.path, l.t)
			if err = m.fsys.Rename(filepath.Join(d.path, l.t.String()), to); err != nil {
				err = m.deleteFailed(d, l.t, err)
				for _, rest := range logs[i:] {
					failed[rest.t] = err
				}
				break
			}
			renamed = append(renamed, to)
		}
		if err == nil {
			if err = m.fsys.SyncDir(d.path); err != nil {
				err = m.deleteFailed(d, logs[0].t, err)
			}
		}
		// What was renamed is out of the way even when the dir failed:
		// remove it in the background either way.
		m.removeInBackground(renamed)
		if err == nil {
			if err = m.checkpointRemoval(d); err != nil {
				err = m.deleteFailed(d, logs[0].t, err)
			}
		}
		if err != nil {
			for _, l := range logs {
				failed[l.t] = err
			}
			continue
		}
		deleted += len(logs)
		for _, l := range logs {
			m.logger.Debug().Str("partition", l.t.String()).Str("log_dir", d.path).Msg("deleted log")
		}
		ev := m.logger.Info()
		if len(logs) == 1 {
			ev = ev.Str("partition", logs[0].t.String())
		}
		ev.Str("log_dir", d.path).Int("logs", len(logs)).Int("deleted_so_far", deleted).Int("to_delete", len(ts)).
			Dur("took", time.Since(dirStart)).Msg("deleted logs")
	}
	if len(dirs) > 1 {
		m.logger.Info().Int("logs", deleted).Int("failed", len(failed)).Dur("took", time.Since(start)).Msg("deleted logs in every dir")
	}
	return failed
}

func (m *Manager) deleteFailed(d *logDir, t tp.TopicPartition, err error) error {
	err = ioError("delete log "+t.String(), err)
	m.reportFailure(d, err)
	return err
}

// shutdownRemovals is how many background removals Shutdown still waits
// for; with more pending it stops them after those in progress (see
// removeInBackground).
const shutdownRemovals = 256

// removalProgressEvery is how many removed dirs make a progress line.
const removalProgressEvery = 1000

// removeInBackground removes deleted-log dirs, at most cap(removeSlots) at
// a time across all calls, so that a StopReplica deleting thousands of logs
// does not flood the disk, on as many goroutines (not one per dir).
// Shutdown waits for a few, but stops thousands after the dirs being
// removed: the rest are "-delete" dirs, which the next Open removes, and a
// broker asked to stop must not wait seconds for them.
func (m *Manager) removeInBackground(paths []string) {
	if len(paths) == 0 {
		return
	}
	m.removalsPending.Add(int64(len(paths)))
	m.removals.Go(func() {
		defer m.removalsPending.Add(-int64(len(paths)))
		start := time.Now()
		var removed atomic.Int64
		runParallel(len(paths), cap(m.removeSlots), func(i int) bool {
			if m.removalsStop.Load() {
				return false
			}
			m.removeSlots <- struct{}{}
			defer func() { <-m.removeSlots }()
			if err := m.fsys.RemoveAll(paths[i]); err != nil {
				m.logger.Warn().Err(err).Str("dir", paths[i]).Msg("cannot remove a deleted log")
				return true
			}
			if n := removed.Add(1); n%removalProgressEvery == 0 {
				m.logger.Info().Int64("removed", n).Int("dirs", len(paths)).Dur("took", time.Since(start)).
					Msg("removing deleted logs' dirs")
			}
			return true
		})
		if len(paths) > 1 {
			m.logger.Info().Int("dirs", len(paths)).Int64("removed", removed.Load()).Dur("took", time.Since(start)).
				Msg("removed deleted logs' dirs")
		}
	})
}
