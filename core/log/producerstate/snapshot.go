package producerstate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/replicad/replicad/core/vfs"
)

// SnapshotVersion is the format version WriteSnapshot writes.
const SnapshotVersion = 1

// SnapshotSuffix ends a snapshot file's name; the name before it is the
// offset in 20 digits, as a segment's.
const SnapshotSuffix = ".snapshot"

// ErrBadSnapshot: a snapshot file that does not decode (torn, damaged, an
// unknown version); the state is rebuilt without it.
var ErrBadSnapshot = errors.New("producer state snapshot unreadable")

const (
	snapshotHeaderSize = 2 + 4 + 8 + 4
	entryHeaderSize    = 8 + 2 + 1
	batchSize          = 4 + 4 + 8 + 8 + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SnapshotPath is the snapshot file of offset in dir.
func SnapshotPath(dir string, offset int64) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", offset, SnapshotSuffix))
}

// Encode serialises the state at offset (see the package comment).
func (m *Manager) Encode(offset int64) []byte {
	size := snapshotHeaderSize
	for _, e := range m.producers {
		size += entryHeaderSize + int(e.n)*batchSize
	}
	buf := make([]byte, snapshotHeaderSize, size)
	binary.BigEndian.PutUint16(buf[0:], SnapshotVersion)
	binary.BigEndian.PutUint64(buf[6:], uint64(offset))
	binary.BigEndian.PutUint32(buf[14:], uint32(len(m.producers)))
	// Sorted by ID: the same state always makes the same bytes.
	ids := make([]int64, 0, len(m.producers))
	for id := range m.producers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := m.producers[id]
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.ID))
		buf = binary.BigEndian.AppendUint16(buf, uint16(e.Epoch))
		buf = append(buf, e.n)
		for _, b := range e.Batches() {
			buf = binary.BigEndian.AppendUint32(buf, uint32(b.FirstSeq))
			buf = binary.BigEndian.AppendUint32(buf, uint32(b.LastSeq))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.FirstOffset))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.LastOffset))
			buf = binary.BigEndian.AppendUint64(buf, uint64(b.MaxTimestamp))
		}
	}
	binary.BigEndian.PutUint32(buf[2:], crc32.Checksum(buf[6:], castagnoli))
	return buf
}

// Decode reads a snapshot that must be of offset into a new Manager
// bounded by maxProducers.
func Decode(data []byte, offset int64, maxProducers int) (*Manager, error) {
	if len(data) < snapshotHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrBadSnapshot, len(data))
	}
	if v := binary.BigEndian.Uint16(data); v != SnapshotVersion {
		return nil, fmt.Errorf("%w: version %d", ErrBadSnapshot, v)
	}
	if stored, computed := binary.BigEndian.Uint32(data[2:]), crc32.Checksum(data[6:], castagnoli); stored != computed {
		return nil, fmt.Errorf("%w: crc %08x, computed %08x", ErrBadSnapshot, stored, computed)
	}
	if got := int64(binary.BigEndian.Uint64(data[6:])); got != offset {
		return nil, fmt.Errorf("%w: holds offset %d, named %d", ErrBadSnapshot, got, offset)
	}
	count := int(binary.BigEndian.Uint32(data[14:]))
	m := NewManager(maxProducers)
	rest := data[snapshotHeaderSize:]
	for i := 0; i < count; i++ {
		if len(rest) < entryHeaderSize {
			return nil, fmt.Errorf("%w: producer %d of %d cut short", ErrBadSnapshot, i, count)
		}
		e := &Entry{ID: int64(binary.BigEndian.Uint64(rest)), Epoch: int16(binary.BigEndian.Uint16(rest[8:])), n: rest[10]}
		rest = rest[entryHeaderSize:]
		if e.n == 0 || e.n > MaxBatches || len(rest) < int(e.n)*batchSize || m.producers[e.ID] != nil {
			return nil, fmt.Errorf("%w: producer %d: %d batches", ErrBadSnapshot, e.ID, e.n)
		}
		for j := range int(e.n) {
			e.batches[j] = Batch{
				FirstSeq:     int32(binary.BigEndian.Uint32(rest)),
				LastSeq:      int32(binary.BigEndian.Uint32(rest[4:])),
				FirstOffset:  int64(binary.BigEndian.Uint64(rest[8:])),
				LastOffset:   int64(binary.BigEndian.Uint64(rest[16:])),
				MaxTimestamp: int64(binary.BigEndian.Uint64(rest[24:])),
			}
			rest = rest[batchSize:]
		}
		m.producers[e.ID] = e
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after %d producers", ErrBadSnapshot, len(rest), count)
	}
	return m, nil
}

// WriteSnapshot writes data as the snapshot of offset in dir atomically: a
// power loss leaves the old file (or none) or the new one, whole.
func WriteSnapshot(fsys vfs.FS, dir string, offset int64, data []byte) error {
	return writeSnapshot(fsys, dir, offset, data, true)
}

// WriteSnapshotUnsynced is WriteSnapshot without its fsyncs, for a caller
// that syncs the whole file system afterwards (a broker's shutdown). A
// power loss before that may leave the file torn or empty: Decode refuses
// it (its CRC, its length), and the state is rebuilt without it.
func WriteSnapshotUnsynced(fsys vfs.FS, dir string, offset int64, data []byte) error {
	return writeSnapshot(fsys, dir, offset, data, false)
}

func writeSnapshot(fsys vfs.FS, dir string, offset int64, data []byte, sync bool) error {
	path := SnapshotPath(dir, offset)
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("write snapshot %s: %w", path, err)
	}
	if !sync {
		return nil
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("write snapshot %s: %w", path, err)
	}
	return nil
}

// Snapshots lists the snapshot offsets in dir, oldest first, and the names
// of leftover temporary files (a write a crash interrupted).
func Snapshots(fsys vfs.FS, dir string) (offsets []int64, leftovers []string, err error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, SnapshotSuffix+".tmp") {
			leftovers = append(leftovers, filepath.Join(dir, name))
			continue
		}
		digits, ok := strings.CutSuffix(name, SnapshotSuffix)
		if !ok || len(digits) != 20 {
			continue
		}
		off, err := strconv.ParseInt(digits, 10, 64)
		if err != nil || off < 0 {
			continue
		}
		offsets = append(offsets, off)
	}
	slices.Sort(offsets)
	return offsets, leftovers, nil
}
