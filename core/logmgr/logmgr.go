package logmgr

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// Errors.
var (
	// ErrNoOnlineDir: every log dir is offline.
	ErrNoOnlineDir = errors.New("logmgr: no online log dir")
	// ErrDirOffline: the log's dir is offline.
	ErrDirOffline = errors.New("logmgr: log dir offline")
	// ErrOtherBroker: a dir's meta.properties names another broker.
	ErrOtherBroker = errors.New("logmgr: log dir belongs to another broker")
	// ErrDuplicateLog: one partition has a log in two dirs, so which one holds
	// the replica is unknown (fatal at start-up, as in Kafka).
	ErrDuplicateLog = errors.New("logmgr: partition log found in two log dirs")
)

// Names of the per-dir files.
const (
	MetaPropertiesFile          = "meta.properties"
	ReplicationOffsetCheckpoint = "replication-offset-checkpoint"
	RecoveryPointCheckpoint     = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpoint    = "log-start-offset-checkpoint"
)

// Suffixes of partition dirs that are not live logs.
const (
	DeleteDirSuffix = "-delete" // a deleted log waiting for removal
	FutureDirSuffix = "-future" // a replica being moved in by alter log dirs
)

// DefaultRecoveryThreadsPerDir is how many logs of one dir are opened (and
// recovered) at once at start-up. Opening is mostly waiting on the disk, so a
// few threads shorten the start of a broker with thousands of partitions.
const DefaultRecoveryThreadsPerDir = 4

// Config configures the manager.
type Config struct {
	Dirs      []string // absolute paths
	BrokerID  int32
	LogConfig log.Config
	Logger    zerolog.Logger
	// RecoveryThreadsPerDir bounds the logs of one dir opened, flushed or
	// closed in parallel (Kafka's num.recovery.threads.per.data.dir);
	// 0 means DefaultRecoveryThreadsPerDir.
	RecoveryThreadsPerDir int
	// BootID names this boot of the machine (Linux's
	// /proc/sys/kernel/random/boot_id): a crash of the process in the same
	// boot lost nothing it had written (see PreviousBrokerEpoch). Empty:
	// unknown, and only a clean shutdown counts.
	BootID string
	// FS is the file system of every dir; nil means vfs.OS.
	FS vfs.FS
	// OnProducerStateRebuilt, when set, hears every rebuild of a log's
	// producer state after a truncation (log.Options), under the log's
	// locks: it must not call the log.
	OnProducerStateRebuilt func(tp.TopicPartition, log.ProducerRebuild)
}

// DirInfo describes one log dir.
type DirInfo struct {
	Path       string
	Online     bool
	Partitions int
	Err        error // why it is offline
}

// DirFailure reports that an IO operation of the manager failed in Dir. The
// receiver takes the dir offline with MarkDirOffline.
type DirFailure struct {
	Dir string
	Err error
}

// Manager is safe for concurrent use.
type Manager struct {
	cfg      Config
	fsys     vfs.FS
	logger   zerolog.Logger
	failures chan DirFailure

	// createMu serializes creating and deleting logs (Kafka's
	// logCreationOrDeletionLock): one partition is never created twice, and
	// the partition counts that choose a dir stay exact. It is held across
	// the IO of one log, never of many, and lookups do not take it.
	createMu sync.Mutex
	// checkpointMu serializes writers of the per-dir checkpoint files, which
	// share their tmp files.
	checkpointMu sync.Mutex
	// hwMu serializes writers of the replication-offset-checkpoint files,
	// and each one takes its snapshot of the HWs under it
	// (writeHighWatermarksLocked): a checkpoint that read a log about to be
	// deleted can then never land after the deletion's rewrite of the file
	// (checkpointRemoval), bringing the deleted log's entry back.
	hwMu sync.Mutex
	// brokerStateMu serializes writers of the broker-state files.
	brokerStateMu sync.Mutex

	mu   sync.RWMutex // guards the fields below and every logDir
	dirs []*logDir    // in config order, which breaks ties between dirs
	logs map[tp.TopicPartition]hostedLog
	// futures are the future logs of partitions being moved to another
	// dir (at most one per partition, never in the dir of its current log).
	futures map[tp.TopicPartition]hostedLog
	closed  bool

	// removals are background removals of deleted logs; Shutdown waits.
	removals    sync.WaitGroup
	removeSlots chan struct{}
	// removalsStop makes the background removals stop (Shutdown);
	// removalsPending counts the dirs handed to them and not done.
	removalsStop    atomic.Bool
	removalsPending atomic.Int64

	// previousBrokerEpoch is read at Open (PreviousBrokerEpoch); brokerEpoch
	// is the current life's, from RecordBrokerEpoch (under mu), written
	// with the clean shutdown.
	previousBrokerEpoch int64
	brokerEpoch         int64
	// fileCache opens the segment and index files of every log, current
	// and future, within LogConfig.MaxOpenFiles descriptors.
	fileCache *log.FileCache

	// lossy: a dir failed in this life (under mu). What it held may be
	// short of what was acknowledged (a failed fsync loses dirty pages), so
	// the next life must not count this one as intact: the other dirs
	// record epoch -1 from then on.
	lossy bool
}

type logDir struct {
	path       string
	online     bool
	err        error
	partitions int
	reported   bool // a failure was sent on the failures channel
}

type hostedLog struct {
	log *log.Log
	dir *logDir
	// topicID is the log's topic ID (partition.metadata), "" when unknown.
	topicID string
}

// Failures reports dirs in which an IO operation of the manager failed
// (creating or deleting a log, a checkpoint, flush or sync). Each dir is
// reported at most once, and the channel has room for every dir, so the
// manager never blocks on it.
func (m *Manager) Failures() <-chan DirFailure { return m.failures }

// GetLog returns the partition's log if it is hosted in an online dir.
func (m *Manager) GetLog(t tp.TopicPartition) (*log.Log, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.logs[t]
	return h.log, ok
}

// DirOf returns the log dir holding the partition's log.
func (m *Manager) DirOf(t tp.TopicPartition) (string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.logs[t]
	if !ok {
		return "", false
	}
	return h.dir.path, true
}

// Logs returns every online log, by partition.
func (m *Manager) Logs() map[tp.TopicPartition]*log.Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[tp.TopicPartition]*log.Log, len(m.logs))
	for t, h := range m.logs {
		out[t] = h.log
	}
	return out
}

// LogsByDir returns every online log grouped by its log dir, in one pass
// under the lock (the HW checkpoint walks every log each interval). Future
// logs are listed in their dir too: a dir never holds both logs of one
// partition.
func (m *Manager) LogsByDir() map[string]map[tp.TopicPartition]*log.Log {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make(map[string]map[tp.TopicPartition]*log.Log, len(m.dirs))
	for _, d := range m.dirs {
		if d.online {
			out[d.path] = make(map[tp.TopicPartition]*log.Log, d.partitions)
		}
	}
	for _, hosted := range []map[tp.TopicPartition]hostedLog{m.logs, m.futures} {
		for t, h := range hosted {
			if byTP, ok := out[h.dir.path]; ok {
				byTP[t] = h.log
			}
		}
	}
	return out
}

// Dirs describes every configured dir.
func (m *Manager) Dirs() []DirInfo {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]DirInfo, len(m.dirs))
	for i, d := range m.dirs {
		out[i] = DirInfo{Path: d.path, Online: d.online, Partitions: d.partitions, Err: d.err}
	}
	return out
}

// reportFailure sends dir's first failure on the failures channel.
// Running out of file descriptors (log.ErrFileLimit) is not one: the
// operation failed, the dir is fine. A log that failed itself (Log.fail)
// reports ErrStorage whatever the cause: it takes no more writes, and only
// its dir going offline, then coming back, reopens it.
func (m *Manager) reportFailure(d *logDir, err error) {
	if errors.Is(err, log.ErrFileLimit) {
		m.logger.Warn().Err(err).Str("log_dir", d.path).Msg("out of file descriptors: the operation failed, the log dir stays online")
		return
	}
	if errors.Is(err, log.ErrNameTooLong) {
		// A name a request gave, not a failing disk.
		m.logger.Warn().Err(err).Str("log_dir", d.path).Msg("name too long: the operation failed, the log dir stays online")
		return
	}
	m.mu.Lock()
	first := d.online && !d.reported
	d.reported = true
	m.mu.Unlock()
	if !first {
		return
	}
	m.logger.Error().Err(err).Str("log_dir", d.path).Msg("log dir failed")
	select {
	case m.failures <- DirFailure{Dir: d.path, Err: err}:
	default: // cannot happen: one report per dir fits the buffer
	}
}

// logOptions are the options every log of d opens with, at path: the
// manager's config, metadata fsynced, the log's storage failures reported
// as d's (Kafka's LogDirFailureChannel: every I/O error of a log, leader,
// follower or future, reaches the one path that takes d offline), and d's
// checkpoints rewritten whenever a truncation lowers the log's recovery
// point.
func (m *Manager) logOptions(d *logDir, path string, t tp.TopicPartition) log.Options {
	var rebuilt func(log.ProducerRebuild)
	if f := m.cfg.OnProducerStateRebuilt; f != nil {
		rebuilt = func(r log.ProducerRebuild) { f(t, r) }
	}
	return log.Options{
		OnProducerStateRebuilt: rebuilt,
		Dir:                    path,
		TopicPartition:         t,
		Config:                 m.cfg.LogConfig,
		SyncMetadata:           true,
		Logger:                 m.cfg.Logger,
		FS:                     m.fsys,
		FileCache:              m.fileCache,
		OnStorageError: func(err error) {
			m.reportFailure(d, fmt.Errorf("logmgr: log %s in %s: %w", t, d.path, err))
		},
		// A truncation's lowered recovery point reaches d's checkpoint
		// before the truncation cuts anything (see log.Options). Not for a
		// log being opened (a recovery that truncates fully): the dir's
		// other logs may not be registered yet, and the checkpoints would
		// lose them; Open rewrites a checkpoint that recovery made stale.
		OnRecoveryPointLowered: func() error {
			if !m.hosts(d, t) {
				return nil
			}
			if err := m.checkpointDir(d); err != nil {
				m.reportFailure(d, err)
				return err
			}
			return nil
		},
	}
}

// FileCacheStats are the figures of the cache of open segment and index
// files (metrics, tests).
func (m *Manager) FileCacheStats() log.FileCacheStats { return m.fileCache.Stats() }

// hosts reports whether the manager holds t's current or future log in d.
// A log being opened (at start, or reopened by a move) is not held yet.
func (m *Manager) hosts(d *logDir, t tp.TopicPartition) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if h, ok := m.logs[t]; ok && h.dir == d {
		return true
	}
	h, ok := m.futures[t]
	return ok && h.dir == d
}

// ReportFailure reports a storage failure of the dir at path, as the logs
// of the dir report theirs: the dir's first failure reaches Failures. An
// unknown path is ignored.
func (m *Manager) ReportFailure(path string, err error) {
	m.mu.RLock()
	d := m.findDirLocked(path)
	m.mu.RUnlock()
	if d != nil {
		m.reportFailure(d, err)
	}
}

// findDirLocked returns the configured dir at path, or nil.
func (m *Manager) findDirLocked(path string) *logDir {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	for _, d := range m.dirs {
		if d.path == path {
			return d
		}
	}
	return nil
}

// snapshot returns the online dirs and their logs (future logs included), so
// that IO on them runs without the lock.
func (m *Manager) snapshot() (dirs []*logDir, logs map[*logDir][]hostedLogEntry) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	logs = make(map[*logDir][]hostedLogEntry)
	for _, d := range m.dirs {
		if d.online {
			dirs = append(dirs, d)
			logs[d] = nil
		}
	}
	for _, hosted := range []map[tp.TopicPartition]hostedLog{m.logs, m.futures} {
		for t, h := range hosted {
			logs[h.dir] = append(logs[h.dir], hostedLogEntry{t: t, log: h.log})
		}
	}
	return dirs, logs
}

type hostedLogEntry struct {
	t   tp.TopicPartition
	log *log.Log
}

// ioError wraps a failed file operation of the manager in log.ErrStorage,
// the error that takes a dir offline, or in log.ErrFileLimit when the
// process ran out of file descriptors, which does not.
func ioError(op string, err error) error {
	switch {
	case errors.Is(err, log.ErrStorage), errors.Is(err, log.ErrFileLimit), errors.Is(err, log.ErrNameTooLong):
		return fmt.Errorf("logmgr: %s: %w", op, err)
	case log.NameTooLong(err):
		return fmt.Errorf("logmgr: %s: %w (%w)", op, err, log.ErrNameTooLong)
	case log.OutOfDescriptors(err):
		return fmt.Errorf("logmgr: %s: %w (%w)", op, err, log.ErrFileLimit)
	}
	return fmt.Errorf("logmgr: %s: %w (%w)", op, err, log.ErrStorage)
}
