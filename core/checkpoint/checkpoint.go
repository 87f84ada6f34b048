package checkpoint

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// ErrMalformed wraps every parse failure. A malformed checkpoint must take its
// log dir offline: it never silently resets a high watermark.
var ErrMalformed = errors.New("checkpoint: malformed file")

// ErrInvalidEntry is returned by the writers for an entry the readers would
// reject (illegal topic, negative partition, offset or epoch), so a checkpoint
// this package writes always reads back.
var ErrInvalidEntry = errors.New("checkpoint: invalid entry")

// Version is the only format version, Kafka's 0.
const Version = 0

// WriteOffsets atomically replaces path with the given offsets, sorted by topic
// and partition. With sync false the data and rename are not fsynced (the
// caller makes them durable later, e.g. with one syncfs for many files).
func WriteOffsets(fsys vfs.FS, path string, offsets map[tp.TopicPartition]int64, sync bool) error {
	entries, topics, err := sortedOffsets(path, offsets)
	if err != nil {
		return err
	}
	size := 32
	for _, e := range entries {
		// topic, partition (<= 10 digits), offset (<= 19 digits), 2 spaces, '\n'
		size += len(topics[e.topic]) + 10 + 19 + 3
	}
	buf := appendHeader(make([]byte, 0, size), len(entries))
	for _, e := range entries {
		buf = append(buf, topics[e.topic]...)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, int64(e.partition), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, e.offset, 10)
		buf = append(buf, '\n')
	}
	return writeAtomic(fsys, path, buf, sync)
}

// offsetEntry is one line of an offset checkpoint; topic indexes the sorted
// topic names, so sorting the entries compares integers, not strings.
type offsetEntry struct {
	topic     int32
	partition int32
	offset    int64
}

// sortedOffsets validates the offsets and returns them sorted by topic, then
// partition, with the sorted distinct topic names. Sorting 50,000 entries by
// string comparison dominated the write time; ranking the few hundred
// distinct topics first makes it an integer sort.
func sortedOffsets(path string, offsets map[tp.TopicPartition]int64) ([]offsetEntry, []string, error) {
	ids := make(map[string]int32)
	var topics []string
	entries := make([]offsetEntry, 0, len(offsets))
	for k, off := range offsets {
		id, ok := ids[k.Topic]
		if !ok {
			// A topic with a space or newline would corrupt the whole file.
			if err := tp.ValidateTopic(k.Topic); err != nil {
				return nil, nil, invalidEntry(path, err.Error())
			}
			id = int32(len(topics))
			ids[k.Topic] = id
			topics = append(topics, k.Topic)
		}
		if k.Partition < 0 || off < 0 {
			return nil, nil, invalidEntry(path, k.String()+" offset "+strconv.FormatInt(off, 10))
		}
		entries = append(entries, offsetEntry{topic: id, partition: k.Partition, offset: off})
	}
	order := make([]int32, len(topics))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int { return cmp.Compare(topics[a], topics[b]) })
	rank := make([]int32, len(topics))
	sorted := make([]string, len(topics))
	for r, id := range order {
		rank[id] = int32(r)
		sorted[r] = topics[id]
	}
	for i := range entries {
		entries[i].topic = rank[entries[i].topic]
	}
	slices.SortFunc(entries, func(a, b offsetEntry) int {
		if c := cmp.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	return entries, sorted, nil
}

// ReadOffsets reads an offset checkpoint. A missing file is an empty map.
func ReadOffsets(fsys vfs.FS, path string) (map[tp.TopicPartition]int64, error) {
	data, err := readFile(fsys, path)
	if err != nil {
		return nil, err
	}
	if data == nil {
		return map[tp.TopicPartition]int64{}, nil
	}
	return parseOffsets(path, data)
}

// EpochEntry is one leader epoch and the offset of its first record.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// WriteEpochs atomically replaces path with the entries, in the order given.
func WriteEpochs(fsys vfs.FS, path string, entries []EpochEntry, sync bool) error {
	buf := appendHeader(make([]byte, 0, 32+len(entries)*32), len(entries))
	for _, e := range entries {
		if e.Epoch < 0 || e.StartOffset < 0 {
			return invalidEntry(path, "epoch "+strconv.FormatInt(int64(e.Epoch), 10)+
				" start offset "+strconv.FormatInt(e.StartOffset, 10))
		}
		buf = strconv.AppendInt(buf, int64(e.Epoch), 10)
		buf = append(buf, ' ')
		buf = strconv.AppendInt(buf, e.StartOffset, 10)
		buf = append(buf, '\n')
	}
	return writeAtomic(fsys, path, buf, sync)
}

// ReadEpochs reads a leader-epoch-checkpoint. A missing file is no entries.
func ReadEpochs(fsys vfs.FS, path string) ([]EpochEntry, error) {
	data, err := readFile(fsys, path)
	if err != nil || data == nil {
		return nil, err
	}
	return parseEpochs(path, data)
}

func appendHeader(buf []byte, count int) []byte {
	buf = strconv.AppendInt(buf, Version, 10)
	buf = append(buf, '\n')
	buf = strconv.AppendInt(buf, int64(count), 10)
	return append(buf, '\n')
}

func invalidEntry(path, what string) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidEntry, path, what)
}
