package logmgr

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// GetOrCreateLog is GetOrCreateLogOfTopic without a topic ID.
func (m *Manager) GetOrCreateLog(t tp.TopicPartition, syncMetadata bool) (*log.Log, error) {
	return m.GetOrCreateLogOfTopic(t, "", syncMetadata)
}

// GetOrCreateLogOfTopic returns the log, creating it in the online dir with
// the fewest partitions, with topicID in its partition.metadata (none when
// empty). An existing log is returned whatever its topic ID: the caller
// compares (TopicID). With syncMetadata false the new files are not
// fsynced; call SyncDirs.
//
// A storage failure is returned wrapping log.ErrStorage (the caller takes the
// partition offline) and reported on Failures (the replica manager takes the
// dir offline).
func (m *Manager) GetOrCreateLogOfTopic(t tp.TopicPartition, topicID string, syncMetadata bool) (*log.Log, error) {
	if l, ok := m.GetLog(t); ok {
		return l, nil
	}
	// The name becomes a path: an unchecked topic could escape the log dir.
	if err := tp.ValidateTopic(t.Topic); err != nil || t.Partition < 0 {
		return nil, fmt.Errorf("logmgr: create log %s: illegal partition name", t)
	}
	if err := tp.ValidateDirName(t); err != nil {
		return nil, fmt.Errorf("logmgr: create log: %w (%w)", err, log.ErrNameTooLong)
	}
	m.createMu.Lock()
	defer m.createMu.Unlock()

	m.mu.RLock()
	h, exists := m.logs[t]
	closed := m.closed
	d := m.nextDirLocked()
	m.mu.RUnlock()
	switch {
	case exists:
		return h.log, nil
	case closed:
		return nil, fmt.Errorf("logmgr: create log %s: %w", t, log.ErrClosed)
	case d == nil:
		return nil, fmt.Errorf("logmgr: create log %s: %w", t, ErrNoOnlineDir)
	}

	// With syncMetadata, log.Open also fsyncs the log dir, making the new
	// partition dir's entry durable.
	l, err := m.openNewLog(d, t, t.String(), "log", topicID, syncMetadata, m.logs, true)
	if err != nil {
		return nil, err
	}
	m.logger.Info().Str("partition", t.String()).Str("log_dir", d.path).Msg("created log")
	return l, nil
}

// nextDirLocked returns the online dir with the fewest partitions, the first
// in config order on a tie (Kafka's nextLogDirs), or nil.
func (m *Manager) nextDirLocked() *logDir {
	var best *logDir
	for _, d := range m.dirs {
		if d.online && (best == nil || d.partitions < best.partitions) {
			best = d
		}
	}
	return best
}

// DeleteLog closes and removes the partition's log (DeleteLogs of one).
// Deleting a partition without a log does nothing.
func (m *Manager) DeleteLog(t tp.TopicPartition) error {
	return m.DeleteLogs([]tp.TopicPartition{t})[t]
}

// deletedDirPath is where a log of t in dir is renamed to when deleted:
// Kafka's name, with the topic cut short to fit (tp.DeleteDirName), so that
// deleting a partition of a long topic does not fail with ENAMETOOLONG.
func deletedDirPath(dir string, t tp.TopicPartition) string {
	return filepath.Join(dir, tp.DeleteDirName(t, uniqueID(), DeleteDirSuffix))
}

// uniqueID names a deleted log's dir, as Kafka's UUID does.
func uniqueID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// closeAll closes logs in parallel; nil entries are skipped. Close errors
// are logged: the logs are being given up either way.
func (m *Manager) closeAll(logs []*log.Log) {
	runParallel(len(logs), m.workers(len(m.dirs)), func(i int) bool {
		if l := logs[i]; l != nil {
			if err := l.Close(); err != nil {
				m.logger.Warn().Err(err).Str("log", l.Dir()).Msg("closing log")
			}
		}
		return true
	})
}

// openNewLog opens (creating) the log of t in d/name and registers it in
// into, counting it in d's partitions when countPartition. The dir is checked
// online again once the log is open: a dir that failed meanwhile has already
// given up its logs (MarkDirOffline), so this one must not be handed out.
// what names the log in errors ("log", "future log").
func (m *Manager) openNewLog(d *logDir, t tp.TopicPartition, name, what, topicID string, syncMetadata bool, into map[tp.TopicPartition]hostedLog, countPartition bool) (*log.Log, error) {
	opts := m.logOptions(d, filepath.Join(d.path, name), t)
	opts.SyncMetadata = syncMetadata
	l, err := log.Open(opts)
	if err == nil && topicID != "" {
		if err = writePartitionMetadata(m.fsys, l.Dir(), topicID, syncMetadata); err != nil {
			_ = l.Close()
			err = ioError("write "+PartitionMetadataFile, err)
		}
	}
	if err != nil {
		err = fmt.Errorf("logmgr: create %s %s in %s: %w", what, t, d.path, err)
		if errors.Is(err, log.ErrStorage) {
			m.reportFailure(d, err)
		}
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !d.online {
		_ = l.Close()
		return nil, fmt.Errorf("logmgr: create %s %s in %s: %w", what, t, d.path, ErrDirOffline)
	}
	into[t] = hostedLog{log: l, dir: d, topicID: topicID}
	if countPartition {
		d.partitions++
	}
	return l, nil
}

// forgetLog takes t's log out of the manager (DeleteLog, SetAsideLog): it is
// no longer served, and its dir counts one partition less. It returns the
// handle for the caller to close and remove.
func (m *Manager) forgetLog(t tp.TopicPartition) (hostedLog, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.logs[t]
	if ok {
		delete(m.logs, t)
		h.dir.partitions--
	}
	return h, ok
}
