package logmgr

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// MarkDirOffline takes dir offline: its logs are closed and forgotten, and the
// partitions they held are returned.
//
// It is idempotent: a dir already offline (or not configured) returns none.
// The partitions come back sorted, so callers act on them in a stable order.
func (m *Manager) MarkDirOffline(dir string, cause error) []tp.TopicPartition {
	if cause == nil {
		cause = errors.New("logmgr: marked offline")
	}
	m.mu.Lock()
	d := m.findDirLocked(dir)
	if d == nil || !d.online {
		m.mu.Unlock()
		return nil
	}
	d.online, d.err, d.reported, d.partitions = false, cause, true, 0
	var lost []tp.TopicPartition
	var logs []*log.Log
	for t, h := range m.logs {
		if h.dir == d {
			lost = append(lost, t)
			logs = append(logs, h.log)
			delete(m.logs, t)
		}
	}
	// A move into the dir is lost with it (the current log stays).
	for t, h := range m.futures {
		if h.dir == d {
			logs = append(logs, h.log)
			delete(m.futures, t)
		}
	}
	m.mu.Unlock()
	m.logger.Error().Err(cause).Str("log_dir", d.path).Int("partitions", len(lost)).Msg("log dir offline")
	m.markLifeLossy()
	// The disk is failing: closing may fail, but must not keep file handles.
	m.closeAll(logs)
	slices.SortFunc(lost, func(a, b tp.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return lost
}

// SyncDirs makes everything written to the online dirs durable (one syncfs per dir).
//
// Logs created with syncMetadata false, thousands of them by one LeaderAndIsr,
// become durable with this one call per file system instead of an fsync per
// file and dir. A dir that fails is reported on Failures.
func (m *Manager) SyncDirs() error {
	dirs, _ := m.snapshot()
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, d := range dirs {
		wg.Go(func() {
			if err := m.fsys.SyncFS(d.path); err != nil {
				errs[i] = ioError("sync log dir "+d.path, err)
				m.reportFailure(d, errs[i])
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// errByDir keeps the first error of each dir.
type errByDir struct {
	mu   sync.Mutex
	errs map[*logDir]error
}

func (e *errByDir) add(d *logDir, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.errs == nil {
		e.errs = make(map[*logDir]error)
	}
	if _, ok := e.errs[d]; !ok {
		e.errs[d] = err
	}
}

// report sends every dir's error on Failures and returns them joined.
func (e *errByDir) report(m *Manager, op string) error {
	var all []error
	for d, err := range e.errs {
		err = fmt.Errorf("logmgr: %s in %s: %w", op, d.path, err)
		m.reportFailure(d, err)
		all = append(all, err)
	}
	return errors.Join(all...)
}
