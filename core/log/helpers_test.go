package log

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// smallConfig rolls and indexes often so that tests cross segment and index
// boundaries with few records.
func smallConfig() Config {
	return Config{SegmentBytes: 2048, IndexIntervalBytes: 300, MaxBatchBytes: 64 << 10, FlushPolicy: FlushOS}
}

// testFileCache is the file cache of every test's logs: three descriptors
// for all of them, so that the tests run with segment and index files
// closed and reopened between (and within) their steps.
var testFileCache = NewFileCache(3)

func testOptions(dir string, cfg Config) Options {
	return Options{
		Dir:            dir,
		TopicPartition: tp.TopicPartition{Topic: "t", Partition: 0},
		Config:         cfg,
		Logger:         zerolog.Nop(),
		FileCache:      testFileCache,
	}
}

func openTestLog(t testing.TB, dir string, cfg Config) *Log {
	t.Helper()
	return openAt(t, testOptions(dir, cfg))
}

func openAt(t testing.TB, opts Options) *Log {
	t.Helper()
	l, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

func closeLog(t testing.TB, l *Log) {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// newBatch builds a batch of n records whose values name the batch and record.
func newBatch(tag string, n int) record.Batch {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{TimestampMs: 1, Key: []byte(tag), Value: []byte(fmt.Sprintf("%s/%d", tag, i))}
	}
	return record.Build(recs, 1)
}

// appendBatches appends count batches of perBatch records as leader in epoch
// and returns copies of the stamped batches.
func appendBatches(t testing.TB, l *Log, epoch int32, count, perBatch int) []record.Batch {
	t.Helper()
	out := make([]record.Batch, 0, count)
	for i := range count {
		b := newBatch(fmt.Sprintf("e%d-b%d-%d", epoch, i, l.LogEndOffset()), perBatch)
		if _, err := l.AppendAsLeader(b, epoch); err != nil {
			t.Fatalf("AppendAsLeader: %v", err)
		}
		out = append(out, bytes.Clone(b))
	}
	return out
}

// readAll reads every batch from offset to the LEO, maxBytes at a time.
func readAll(t testing.TB, l *Log, from int64, maxBytes int) []record.Batch {
	t.Helper()
	var out []record.Batch
	for from < l.LogEndOffset() {
		info, err := l.Read(from, maxBytes, l.LogEndOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", from, err)
		}
		batches := splitBatches(t, info.Data)
		if len(batches) == 0 {
			t.Fatalf("Read(%d) returned nothing below LEO %d", from, l.LogEndOffset())
		}
		out = append(out, batches...)
		from = batches[len(batches)-1].NextOffset()
	}
	return out
}

// splitBatches splits data into verified batches.
func splitBatches(t testing.TB, data []byte) []record.Batch {
	t.Helper()
	var out []record.Batch
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err != nil {
			t.Fatalf("split: %v", err)
		}
		if err := b.Verify(); err != nil {
			t.Fatalf("read batch at %d: %v", b.BaseOffset(), err)
		}
		out = append(out, b)
		data = rest
	}
	return out
}

func requireSameBatches(t testing.TB, got, want []record.Batch) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d batches, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("batch %d (base %d) differs from the one written (base %d)", i, got[i].BaseOffset(), want[i].BaseOffset())
		}
	}
}

func lastSegmentPath(t testing.TB, l *Log) string {
	t.Helper()
	segs := l.Segments()
	return segmentPath(l.Dir(), segs[len(segs)-1].BaseOffset, logFileSuffix)
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range names {
		names[i] = filepath.Base(n)
	}
	return names
}
