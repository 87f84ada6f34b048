package logmgr

import (
	"path/filepath"

	"github.com/replicad/replicad/core/tp"
)

// StrayDirSuffix ends the name of a log set aside (SetAsideLog): Kafka's
// name for a log found on a broker that no topic it knows owns
// (LocalLog.logStrayDirName).
const StrayDirSuffix = "-stray"

// SetAsideLog takes the partition's log out of service without deleting a
// byte of it: it is closed, its dir renamed to "<name>.<id>-stray" (which
// Open never loads and never removes) and the parent fsynced, and the dir's
// recovery-point, log-start and HW checkpoints are rewritten without the
// partition (checkpointRemoval), so that a log created again under the name starts from
// nothing. It returns the new path of the dir. A future log of the
// partition (a move in progress, a copy of the same data) is deleted. The
// operator decides what becomes of the set-aside dir. No log: "" and nil.
func (m *Manager) SetAsideLog(t tp.TopicPartition) (string, error) {
	if _, ok := m.FutureDirOf(t); ok {
		if err := m.DeleteFutureLog(t); err != nil {
			return "", err
		}
	}
	m.createMu.Lock()
	defer m.createMu.Unlock()
	h, ok := m.forgetLog(t)
	if !ok {
		return "", nil
	}
	if err := h.log.Close(); err != nil {
		// What it could not flush is what a crash would lose: the rest is
		// kept, and the rename goes on.
		m.logger.Warn().Err(err).Str("partition", t.String()).Msg("closing a log set aside")
	}
	aside := filepath.Join(h.dir.path, tp.DeleteDirName(t, uniqueID(), StrayDirSuffix))
	if err := m.fsys.Rename(h.log.Dir(), aside); err != nil {
		return "", m.setAsideFailed(h.dir, t, err)
	}
	if err := m.fsys.SyncDir(h.dir.path); err != nil {
		return "", m.setAsideFailed(h.dir, t, err)
	}
	if err := m.checkpointRemoval(h.dir); err != nil {
		return "", m.setAsideFailed(h.dir, t, err)
	}
	m.logger.Warn().Str("partition", t.String()).Str("log_dir", h.dir.path).Str("set_aside_dir", aside).
		Msg("log set aside: kept on disk, never served")
	return aside, nil
}

func (m *Manager) setAsideFailed(d *logDir, t tp.TopicPartition, err error) error {
	err = ioError("set aside log "+t.String(), err)
	m.reportFailure(d, err)
	return err
}
