package log

import (
	"bytes"
	"os"
	"testing"

	"github.com/replicad/replicad/core/record"
)

// FuzzRecovery ensures bytes after the last valid batch never panic recovery, lose a batch, or add one failing its CRC.
func FuzzRecovery(f *testing.F) {
	next := func(base int64) []byte {
		b := newBatch("fuzz", 2)
		b.SetBaseOffset(base)
		b.SetLeaderEpoch(1)
		return b
	}
	const leo = 6 // three batches of two records
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add(make([]byte, 100))                                 // zeros: blocks allocated, data never written
	f.Add(bytes.Repeat([]byte{0xff}, 100))                   // impossible length
	f.Add(next(leo)[:30])                                    // torn header
	f.Add(next(leo)[:len(next(leo))-1])                      // torn body
	f.Add(next(leo))                                         // a whole valid batch: recovery keeps it
	f.Add(append(next(leo), next(leo+2)...))                 // two of them
	f.Add(append(next(leo), 1, 2, 3))                        // a valid batch, then garbage
	f.Add(next(leo + 1))                                     // valid, but not the next offset
	f.Add(append(bytes.Clone(next(leo)[:40]), next(leo)...)) // a torn batch with a valid one inside it
	flipped := next(leo)
	flipped[len(flipped)-1] ^= 1
	f.Add(flipped) // fails its CRC

	f.Fuzz(func(t *testing.T, tail []byte) {
		dir := t.TempDir()
		l := openTestLog(t, dir, smallConfig())
		written := appendBatches(t, l, 1, leo/2, 2)
		path := lastSegmentPath(t, l)
		closeLog(t, l)
		appendToFile(t, path, tail)

		l = reopen(t, dir, 0)
		defer closeLog(t, l)
		got := readAll(t, l, 0, 1<<20) // verifies every batch read
		if len(got) < len(written) {
			t.Fatalf("recovered %d batches, wrote %d", len(got), len(written))
		}
		requireSameBatches(t, got[:len(written)], written)
		extra := bytes.Join(bytesOf(got[len(written):]), nil)
		if !bytes.HasPrefix(tail, extra) {
			t.Fatalf("recovered %d bytes that were not appended", len(extra))
		}
		for i, b := range got[1:] {
			if b.BaseOffset() != got[i].NextOffset() {
				t.Fatalf("batch at %d follows one ending at %d", b.BaseOffset(), got[i].LastOffset())
			}
		}
	})
}

func bytesOf(batches []record.Batch) [][]byte {
	out := make([][]byte, len(batches))
	for i, b := range batches {
		out[i] = b
	}
	return out
}

func appendToFile(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
