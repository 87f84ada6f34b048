package logmgr

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// PartitionMetadataFile is each partition dir's record of its topic's ID
// (Kafka's partition.metadata, KIP-516), written when the log is created
// for a topic ID, or when a log from before topic IDs first learns one.
// A log is never reused for another topic ID: a topic deleted while a
// replica was down and created again under its name has another ID, and
// leader epochs, which restart at 0, cannot tell the two logs apart.
const PartitionMetadataFile = "partition.metadata"

// partitionMetadataVersion is the format of PartitionMetadataFile (Kafka's).
const partitionMetadataVersion = "0"

// ErrInconsistentTopicID: a partition's log belongs to another topic ID.
var ErrInconsistentTopicID = errors.New("logmgr: the log belongs to another topic ID")

// TopicID is the topic ID of the partition's log, "" when the log has none
// (created before topic IDs, or without one) or is not hosted.
func (m *Manager) TopicID(t tp.TopicPartition) string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.logs[t].topicID
}

// SetTopicID records id as the topic ID of the partition's log, which has
// none yet (a log created before topic IDs): partition.metadata is written,
// durably, for its future log too when it is being moved, so that the ID
// survives the move. A log of another topic ID is ErrInconsistentTopicID;
// no log, or the same ID, does nothing. A failed write takes the dir
// offline. createMu keeps a move from swapping the logs meanwhile.
func (m *Manager) SetTopicID(t tp.TopicPartition, id string) error {
	if id == "" {
		return nil
	}
	m.createMu.Lock()
	defer m.createMu.Unlock()
	m.mu.RLock()
	h, ok := m.logs[t]
	fut, moving := m.futures[t]
	m.mu.RUnlock()
	switch {
	case !ok || h.topicID == id:
		return nil
	case h.topicID != "":
		return fmt.Errorf("%w: %s has topic ID %s, not %s", ErrInconsistentTopicID, t, h.topicID, id)
	}
	record := func(logs map[tp.TopicPartition]hostedLog, h hostedLog) error {
		if err := writePartitionMetadata(m.fsys, h.log.Dir(), id, true); err != nil {
			err = ioError("write "+PartitionMetadataFile+" of "+t.String(), err)
			m.reportFailure(h.dir, err)
			return err
		}
		m.mu.Lock()
		if cur, ok := logs[t]; ok && cur.log == h.log {
			cur.topicID = id
			logs[t] = cur
		}
		m.mu.Unlock()
		return nil
	}
	if err := record(m.logs, h); err != nil {
		return err
	}
	if moving {
		if err := record(m.futures, fut); err != nil {
			return err
		}
	}
	m.logger.Info().Str("partition", t.String()).Str("topic_id", id).Msg("log takes its topic ID")
	return nil
}

// malformedTopicID stands for the topic ID of a log whose partition.metadata
// does not parse: it matches no real ID (those never start with '-'), so the
// log is never taken for any topic's and is deleted as stray by the first
// LeaderAndIsr naming one; its leader has the data.
const malformedTopicID = "-malformed"

// writePartitionMetadata writes dir's partition.metadata naming id.
func writePartitionMetadata(fsys vfs.FS, dir, id string, sync bool) error {
	data := "version: " + partitionMetadataVersion + "\ntopic_id: " + id + "\n"
	return checkpoint.WriteFileAtomic(fsys, filepath.Join(dir, PartitionMetadataFile), []byte(data), sync)
}

// readPartitionMetadata returns the topic ID in dir's partition.metadata,
// "" when there is none. A file that does not parse is an error: its log
// cannot be told from a log of another topic of the same name.
func readPartitionMetadata(fsys vfs.FS, dir string) (string, error) {
	path := filepath.Join(dir, PartitionMetadataFile)
	data, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	props, err := parseProperties(data)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if v := props["version"]; v != partitionMetadataVersion {
		return "", fmt.Errorf("%s: version %q, want %s", path, v, partitionMetadataVersion)
	}
	id := strings.TrimSpace(props["topic_id"])
	if err := tp.ValidateTopicID(id); err != nil || id == "" {
		return "", fmt.Errorf("%s: topic_id %q: %v", path, id, err)
	}
	return id, nil
}
