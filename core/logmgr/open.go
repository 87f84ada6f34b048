package logmgr

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// Open prepares every dir: creates it and meta.properties if missing (refusing
// a dir of another broker with ErrOtherBroker, a fatal start-up error), reads
// its recovery-point and log-start checkpoints and opens every partition log in
// it. A dir whose files cannot be read or parsed is offline, not fatal; Open
// fails only when no dir is online.
//
// The checkpoints are read here only: from then on the logs carry their
// recovery points and log start offsets, and the files are only written.
// Partition dirs ending in "-delete" are removed in the background; future
// replicas ("<topic>-<partition>.<id>-future") are loaded as future logs, and
// one whose partition has no current log in any dir (a crash between the two
// renames of a swap) becomes the current log; those ending in ".tmp" and
// names that are not "<topic>-<partition>" are left alone.
func Open(cfg Config) (*Manager, error) {
	if cfg.RecoveryThreadsPerDir <= 0 {
		cfg.RecoveryThreadsPerDir = DefaultRecoveryThreadsPerDir
	}
	paths, err := absDirs(cfg.Dirs)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		cfg:         cfg,
		fsys:        vfs.Or(cfg.FS),
		logger:      cfg.Logger.With().Str("component", "logmgr").Logger(),
		failures:    make(chan DirFailure, len(paths)),
		removeSlots: make(chan struct{}, 2),
		logs:        make(map[tp.TopicPartition]hostedLog),
		futures:     make(map[tp.TopicPartition]hostedLog),
		fileCache:   log.NewFileCache(cfg.LogConfig.MaxOpenFiles),
	}
	fresh := make(map[*logDir]bool)
	for _, p := range paths {
		d := &logDir{path: p, online: true}
		m.dirs = append(m.dirs, d)
		created, err := m.prepareDir(p)
		if err != nil {
			if errors.Is(err, ErrOtherBroker) {
				return nil, err
			}
			m.setOffline(d, err)
		}
		fresh[d] = created
	}
	if err := m.loadLogs(); err != nil {
		return nil, err
	}
	m.previousBrokerEpoch = previousLife(m.fsys, m.dirs, fresh, cfg.BootID)
	var causes []string
	for _, d := range m.dirs {
		if d.online {
			return m, nil
		}
		causes = append(causes, d.err.Error())
	}
	return nil, fmt.Errorf("%w: %s", ErrNoOnlineDir, strings.Join(causes, "; "))
}

// absDirs returns the dirs as clean absolute paths, refusing none or repeats.
func absDirs(dirs []string) ([]string, error) {
	if len(dirs) == 0 {
		return nil, fmt.Errorf("%w: no log dirs configured", ErrNoOnlineDir)
	}
	out := make([]string, 0, len(dirs))
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("logmgr: log dir %q: %w", d, err)
		}
		for _, seen := range out {
			if seen == abs {
				return nil, fmt.Errorf("logmgr: log dir %s configured twice", abs)
			}
		}
		out = append(out, abs)
	}
	return out, nil
}

// prepareDir creates dir when missing and checks its meta.properties;
// created says the dir had none (it is new to this broker).
func (m *Manager) prepareDir(dir string) (created bool, err error) {
	if err := mkdirDurable(m.fsys, dir); err != nil {
		return false, ioError("create log dir", err)
	}
	return checkMeta(m.fsys, dir, m.cfg.BrokerID)
}

// mkdirDurable creates dir and its missing parents, fsyncing the parent of
// each one it creates: a log dir whose own entry a power loss takes away
// takes every log in it along, however durably each was created.
func mkdirDurable(fsys vfs.FS, dir string) error {
	err := fsys.Mkdir(dir, 0o755)
	if errors.Is(err, fs.ErrNotExist) {
		if parent := filepath.Dir(dir); parent != dir {
			if err := mkdirDurable(fsys, parent); err != nil {
				return err
			}
		}
		err = fsys.Mkdir(dir, 0o755)
	}
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil
	case err != nil:
		return err
	}
	return fsys.SyncDir(filepath.Dir(dir))
}

// setOffline records at start-up that d is offline.
func (m *Manager) setOffline(d *logDir, err error) {
	m.logger.Error().Err(err).Str("log_dir", d.path).Msg("log dir is offline")
	d.online, d.err = false, err
}

// loadLogs opens the logs of every online dir, the dirs in parallel. A dir
// whose checkpoints or logs fail goes offline; only a partition found in two
// dirs fails the load, since either copy could be the stale one.
func (m *Manager) loadLogs() error {
	loaded := make([]map[tp.TopicPartition]*log.Log, len(m.dirs))
	loadedFutures := make([]map[tp.TopicPartition]*log.Log, len(m.dirs))
	topicIDs := make([]map[string]string, len(m.dirs))
	stale := make([][]string, len(m.dirs))
	errs := make([]error, len(m.dirs))
	var wg sync.WaitGroup
	for i, d := range m.dirs {
		if d.online {
			wg.Go(func() { loaded[i], loadedFutures[i], topicIDs[i], stale[i], errs[i] = m.loadDir(d) })
		}
	}
	wg.Wait()
	for i, d := range m.dirs {
		if errs[i] != nil {
			m.setOffline(d, errs[i])
		}
	}
	closeLoaded := func() {
		for i := range loaded {
			m.closeAll(slices.Collect(maps.Values(loaded[i])))
			m.closeAll(slices.Collect(maps.Values(loadedFutures[i])))
		}
	}
	owner := make(map[tp.TopicPartition]*logDir)
	futureOwner := make(map[tp.TopicPartition]*logDir)
	for i := range loaded {
		for t := range loaded[i] {
			if other, dup := owner[t]; dup {
				closeLoaded()
				return fmt.Errorf("%w: %s in %s and %s", ErrDuplicateLog, t, other.path, m.dirs[i].path)
			}
			owner[t] = m.dirs[i]
		}
		for t := range loadedFutures[i] {
			if other, dup := futureOwner[t]; dup {
				closeLoaded()
				return fmt.Errorf("%w: future log of %s in %s and %s", ErrDuplicateLog, t, other.path, m.dirs[i].path)
			}
			futureOwner[t] = m.dirs[i]
		}
	}
	futures := make(map[tp.TopicPartition]hostedLog)
	for i, logs := range loaded {
		for t, l := range logs {
			m.logs[t] = hostedLog{log: l, dir: m.dirs[i], topicID: topicIDs[i][l.Dir()]}
		}
		for t, l := range loadedFutures[i] {
			futures[t] = hostedLog{log: l, dir: m.dirs[i], topicID: topicIDs[i][l.Dir()]}
		}
		m.dirs[i].partitions = len(logs)
		m.removeInBackground(stale[i])
	}
	futures, err := m.promoteOrphanFutures(futures)
	if err != nil {
		m.closeAll(slices.Collect(maps.Values(m.Logs())))
		for _, h := range futures {
			_ = h.log.Close()
		}
		return err
	}
	maps.Copy(m.futures, futures)
	m.repairDamagedFutures()
	return nil
}

// repairDamagedFutures cuts every future log that opened damaged (see
// log.Damaged) at its damage: it is a copy of its partition's current log,
// which the alter-log-dirs fetcher copies the rest from. (A current log
// keeps its damage until it follows a leader; an orphan future promoted to
// current above is one.) A repair that fails has failed the log, which
// takes its dir offline.
func (m *Manager) repairDamagedFutures() {
	for t, fut := range m.FutureLogs() {
		d, ok := fut.Damaged()
		if !ok {
			continue
		}
		err := fut.RepairDamage()
		m.logger.Warn().Err(err).Str("partition", t.String()).Str("log", fut.Dir()).Int64("damaged_offset", d.Offset).
			AnErr("damage", d.Cause).Msg("future log damaged below its recovery point: cut at the damage, the move copies the rest again")
	}
}

// loadDir reads dir's checkpoints and opens its partition logs and future
// logs, a few at a time. It returns the logs, the future logs and the
// deleted-log dirs still to be removed.
func (m *Manager) loadDir(d *logDir) (logs, futures map[tp.TopicPartition]*log.Log, topicIDs map[string]string, stale []string, err error) {
	start := time.Now()
	dir := d.path
	recoveryPoints, err := checkpoint.ReadOffsets(m.fsys, filepath.Join(dir, RecoveryPointCheckpoint))
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("logmgr: load %s: %w", RecoveryPointCheckpoint, err)
	}
	logStarts, err := checkpoint.ReadOffsets(m.fsys, filepath.Join(dir, LogStartOffsetCheckpoint))
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("logmgr: load %s: %w", LogStartOffsetCheckpoint, err)
	}
	parts, stale, err := m.scanDir(dir)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	opened := make([]*log.Log, len(parts))
	ids := make([]string, len(parts))
	var mu sync.Mutex
	var firstErr error
	runParallel(len(parts), m.cfg.RecoveryThreadsPerDir, func(i int) bool {
		t := parts[i].t
		// A partition missing from the checkpoints has recovery point 0:
		// every segment is recovered. A dir holds at most one of a
		// partition's current and future logs, so the checkpoint entry is
		// that one's.
		opts := m.logOptions(d, filepath.Join(dir, parts[i].name), t)
		opts.RecoveryPoint, opts.LogStartOffset = recoveryPoints[t], logStarts[t]
		l, err := log.Open(opts)
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = fmt.Errorf("logmgr: load log %s: %w", t, err)
			}
			mu.Unlock()
			return false
		}
		opened[i] = l
		id, err := readPartitionMetadata(m.fsys, l.Dir())
		if err != nil {
			// Its log cannot be told from a log of another topic of the
			// name: it is never reused (see malformedTopicID).
			m.logger.Warn().Err(err).Str("log", l.Dir()).Msg("partition.metadata does not parse: the log is taken for no topic ID and deleted when a LeaderAndIsr names one")
			id = malformedTopicID
		}
		ids[i] = id
		return true
	})
	if firstErr != nil {
		m.closeAll(opened)
		return nil, nil, nil, nil, firstErr
	}
	topicIDs = make(map[string]string, len(parts))
	for i, l := range opened {
		topicIDs[l.Dir()] = ids[i]
	}
	if err := m.rewriteStaleCheckpoints(dir, parts, opened, recoveryPoints, logStarts); err != nil {
		m.closeAll(opened)
		return nil, nil, nil, nil, err
	}
	logs = make(map[tp.TopicPartition]*log.Log, len(parts))
	futures = make(map[tp.TopicPartition]*log.Log)
	for i, pd := range parts {
		if pd.future {
			futures[pd.t] = opened[i]
		} else {
			logs[pd.t] = opened[i]
		}
	}
	m.logger.Info().Str("log_dir", dir).Int("logs", len(logs)).Int("future_logs", len(futures)).
		Dur("took", time.Since(start)).Msg("loaded log dir")
	return logs, futures, topicIDs, stale, nil
}

// rewriteStaleCheckpoints rewrites dir's recovery-point and log-start
// checkpoints when they claim more than recovery found: a log recovered
// below its checkpointed recovery point (a power loss took records, or a
// recovery truncated fully), or an entry for a partition with no log in the
// dir (a deletion or a move cut before its checkpoint). Left as
// it is, the file would go on claiming the lost offsets: after the next
// crash recovery would trust, unread, whatever unflushed records were
// appended there since, and a log created again under the same name would
// inherit the old one's offsets.
func (m *Manager) rewriteStaleCheckpoints(dir string, parts []partitionDir, opened []*log.Log, recoveryPoints, logStarts map[tp.TopicPartition]int64) error {
	stale := false
	entries := make([]hostedLogEntry, len(parts))
	found := make(map[tp.TopicPartition]bool, len(parts))
	for i, pd := range parts {
		entries[i] = hostedLogEntry{t: pd.t, log: opened[i]}
		found[pd.t] = true
		stale = stale || opened[i].RecoveryPoint() < recoveryPoints[pd.t]
	}
	for _, checkpointed := range []map[tp.TopicPartition]int64{recoveryPoints, logStarts} {
		for t := range checkpointed {
			stale = stale || !found[t]
		}
	}
	if !stale {
		return nil
	}
	m.checkpointMu.Lock()
	defer m.checkpointMu.Unlock()
	if err := writeOffsetCheckpoints(m.fsys, dir, entries); err != nil {
		return fmt.Errorf("logmgr: rewrite stale checkpoints: %w", err)
	}
	return nil
}

// partitionDir is a partition log dir found by scanDir.
type partitionDir struct {
	t      tp.TopicPartition
	name   string
	future bool
}

// scanDir lists dir's partition logs (current and future) and its deleted-log dirs.
func (m *Manager) scanDir(dir string) (parts []partitionDir, stale []string, err error) {
	entries, err := m.fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, ioError("list log dir", err)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case !e.IsDir():
			continue // meta.properties, checkpoints
		case strings.HasSuffix(name, DeleteDirSuffix):
			stale = append(stale, filepath.Join(dir, name))
			continue
		case strings.HasSuffix(name, ".tmp"):
			continue
		case strings.HasSuffix(name, StrayDirSuffix):
			// A log set aside (SetAsideLog): kept for the operator, never
			// loaded, never removed.
			m.logger.Info().Str("log_dir", dir).Str("set_aside_dir", name).Msg("keeping a log set aside; it is not served")
			continue
		case strings.HasSuffix(name, FutureDirSuffix):
			t, err := parseFutureDirName(name)
			if err != nil {
				m.logger.Warn().Err(err).Str("log_dir", dir).Msg("skipping a future dir that does not name a partition")
				continue
			}
			parts = append(parts, partitionDir{t: t, name: name, future: true})
			continue
		}
		t, err := tp.ParseDirName(name)
		if err != nil {
			// Not ours (lost+found on a mount point, say): never touch it.
			m.logger.Warn().Err(err).Str("log_dir", dir).Msg("skipping a dir that is not a partition log")
			continue
		}
		parts = append(parts, partitionDir{t: t, name: name})
	}
	return parts, stale, nil
}
