package log

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/vfs"
)

// recoveryFixture writes 40 batches of 3 records over several segments
// (epoch 1, then epoch 2 for the last 5 batches), closes the log and returns
// its dir and batches.
func recoveryFixture(t *testing.T) (string, []record.Batch) {
	t.Helper()
	dir := t.TempDir()
	l := openTestLog(t, dir, smallConfig())
	written := appendBatches(t, l, 1, 35, 3)
	written = append(written, appendBatches(t, l, 2, 5, 3)...)
	if len(l.Segments()) < 3 {
		t.Fatalf("fixture needs several segments, has %v", l.Segments())
	}
	closeLog(t, l)
	return dir, written
}

func reopen(t *testing.T, dir string, recoveryPoint int64) *Log {
	t.Helper()
	opts := testOptions(dir, smallConfig())
	opts.RecoveryPoint = recoveryPoint
	return openAt(t, opts)
}

// requireRecoveredTo ensures the reopened log holds exactly want, that the
// last segment file was cut to the valid bytes, and that appends continue
// at the recovered LEO.
func requireRecoveredTo(t *testing.T, l *Log, want []record.Batch) {
	t.Helper()
	wantLEO := want[len(want)-1].NextOffset()
	if l.LogEndOffset() != wantLEO {
		t.Fatalf("LEO %d, want %d", l.LogEndOffset(), wantLEO)
	}
	requireSameBatches(t, readAll(t, l, 0, 700), want)
	segs := l.Segments()
	if got := fileSize(t, lastSegmentPath(t, l)); got != segs[len(segs)-1].Size {
		t.Fatalf("last segment file is %d bytes, log says %d", got, segs[len(segs)-1].Size)
	}
	if len(segmentFiles(t, l.Dir())) != len(segs) {
		t.Fatalf("files %v, segments %v", segmentFiles(t, l.Dir()), segs)
	}
	b := appendBatches(t, l, 3, 1, 1)
	if b[0].BaseOffset() != wantLEO {
		t.Fatalf("append after recovery at %d, want %d", b[0].BaseOffset(), wantLEO)
	}
}

// TestRecoveryTornTail ensures bytes cut off the last segment lose exactly the torn batch, whatever the recovery point.
func TestRecoveryTornTail(t *testing.T) {
	_, written := recoveryFixture(t)
	last := len(written[len(written)-1])
	for _, cut := range []int{1, 10, last - record.HeaderSize, last - 5, last} {
		for _, rp := range []string{"zero", "last segment", "last batch"} {
			t.Run(fmt.Sprintf("cut %d rp %s", cut, rp), func(t *testing.T) {
				dir, written := recoveryFixture(t)
				l := reopen(t, dir, 1<<40)
				recoveryPoint := map[string]int64{
					"zero":         0,
					"last segment": l.Segments()[len(l.Segments())-1].BaseOffset,
					"last batch":   written[len(written)-1].BaseOffset(),
				}[rp]
				path := lastSegmentPath(t, l)
				closeLog(t, l)
				if err := os.Truncate(path, fileSize(t, path)-int64(cut)); err != nil {
					t.Fatal(err)
				}
				l = reopen(t, dir, recoveryPoint)
				defer closeLog(t, l)
				requireRecoveredTo(t, l, written[:len(written)-1])
			})
		}
	}
}

// TestRecoveryBadCRC ensures a flipped byte in the last batch fails its CRC on recovery and that batch is truncated.
func TestRecoveryBadCRC(t *testing.T) {
	dir, written := recoveryFixture(t)
	l := reopen(t, dir, 1<<40)
	path := lastSegmentPath(t, l)
	closeLog(t, l)
	flipByte(t, path, fileSize(t, path)-7)

	l = reopen(t, dir, 0)
	defer closeLog(t, l)
	requireRecoveredTo(t, l, written[:len(written)-1])
}

// TestRecoveryCorruptMiddleSegment ensures damage in an earlier segment cuts the log there and deletes later segments.
func TestRecoveryCorruptMiddleSegment(t *testing.T) {
	dir, written := recoveryFixture(t)
	l := reopen(t, dir, 1<<40)
	segs := l.Segments()
	closeLog(t, l)
	second := segs[1]
	flipByte(t, segmentPath(dir, second.BaseOffset, logFileSuffix), record.HeaderSize+2) // first batch of segment 1

	l = reopen(t, dir, segs[1].BaseOffset)
	defer closeLog(t, l)
	if got := l.Segments(); len(got) != 2 || got[1] != (SegmentInfo{BaseOffset: second.BaseOffset}) {
		t.Fatalf("segments %v, want segment 0 and an empty segment %d", got, second.BaseOffset)
	}
	keep := slices.IndexFunc(written, func(b record.Batch) bool { return b.BaseOffset() == second.BaseOffset })
	requireRecoveredTo(t, l, written[:keep])
}

// TestRecoveryGapDropsLaterSegments ensures a missing middle segment ends the log before the gap.
func TestRecoveryGapDropsLaterSegments(t *testing.T) {
	dir, written := recoveryFixture(t)
	l := reopen(t, dir, 1<<40)
	segs := l.Segments()
	closeLog(t, l)
	if err := os.Remove(segmentPath(dir, segs[2].BaseOffset, logFileSuffix)); err != nil {
		t.Fatal(err)
	}
	l = reopen(t, dir, 0)
	defer closeLog(t, l)
	keep := slices.IndexFunc(written, func(b record.Batch) bool { return b.BaseOffset() == segs[2].BaseOffset })
	requireRecoveredTo(t, l, written[:keep])
}

// TestRecoveryTrimsEpochCache ensures epochs whose batches were lost with a torn tail leave the cache.
func TestRecoveryTrimsEpochCache(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallConfig())
	appendBatches(t, l, 1, 5, 2)
	appendBatches(t, l, 2, 1, 2) // epoch 2 starts at 10, in the last batch
	path := lastSegmentPath(t, l)
	closeLog(t, l)
	if err := os.Truncate(path, fileSize(t, path)-3); err != nil {
		t.Fatal(err)
	}
	l = reopen(t, dir, 0)
	defer closeLog(t, l)
	if got := l.EpochCache().Entries(); !slices.Equal(got, []checkpoint.EpochEntry{ep(1, 0)}) || l.LatestEpoch() != 1 {
		t.Fatalf("epochs %v after losing epoch 2's only batch", got)
	}
}

// TestRecoveryRestoresEpochsFromBatches ensures recovered batches re-add epochs a lost checkpoint write dropped.
func TestRecoveryRestoresEpochsFromBatches(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallConfig())
	appendBatches(t, l, 1, 5, 2)
	appendBatches(t, l, 3, 5, 2) // epoch 3 starts at 10
	want := l.EpochCache().Entries()
	closeLog(t, l)
	// The checkpoint as it was before epoch 3, as if its rewrite never reached the disk.
	if err := checkpoint.WriteEpochs(vfs.OS, filepath.Join(dir, EpochCheckpointFile), want[:1], false); err != nil {
		t.Fatal(err)
	}
	l = reopen(t, dir, 0)
	defer closeLog(t, l)
	if got := l.EpochCache().Entries(); !slices.Equal(got, want) || !slices.Equal(want, []checkpoint.EpochEntry{ep(1, 0), ep(3, 10)}) {
		t.Fatalf("epochs %v after recovery, want %v", got, want)
	}
}

// TestMissingIndexRebuilt ensures missing or damaged indexes, sealed or active, are rebuilt to the same bytes and used.
func TestMissingIndexRebuilt(t *testing.T) {
	damages := map[string]func(path string){
		"missing": func(path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
		"torn": func(path string) {
			if err := os.Truncate(path, fileSize(t, path)-3); err != nil {
				t.Fatal(err)
			}
		},
		"stale last entry": func(path string) { flipByte(t, path, fileSize(t, path)-1) },
	}
	for name, damage := range damages {
		t.Run(name, func(t *testing.T) {
			dir, written := recoveryFixture(t)
			l := reopen(t, dir, 1<<40)
			segs := l.Segments()
			leo := l.LogEndOffset()
			closeLog(t, l)
			indexes := map[string][]byte{}
			for _, s := range []SegmentInfo{segs[0], segs[len(segs)-1]} {
				path := segmentPath(dir, s.BaseOffset, indexFileSuffix)
				indexes[path] = readFile(t, path)
				if len(indexes[path]) < 2*indexEntrySize {
					t.Fatalf("index %s has %d bytes, want entries to damage", path, len(indexes[path]))
				}
				damage(path)
			}

			l = reopen(t, dir, leo)
			requireSameBatches(t, readAll(t, l, 0, 1), written)
			for off := int64(0); off < leo; off += 7 {
				info, err := l.Read(off, 1, leo)
				if err != nil || splitBatches(t, info.Data)[0].LastOffset() < off {
					t.Fatalf("Read(%d): %v", off, err)
				}
			}
			closeLog(t, l)
			for path, want := range indexes {
				if got := readFile(t, path); !bytes.Equal(got, want) {
					t.Fatalf("%s rebuilt as %x, want %x", path, got, want)
				}
			}
		})
	}
}

// TestOrphanIndexRemoved ensures an index without its log file is deleted on open.
func TestOrphanIndexRemoved(t *testing.T) {
	dir, _ := recoveryFixture(t)
	orphan := segmentPath(dir, 1<<30, indexFileSuffix)
	if err := os.WriteFile(orphan, make([]byte, 8), 0o644); err != nil {
		t.Fatal(err)
	}
	l := reopen(t, dir, 0)
	defer closeLog(t, l)
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("orphan index kept: %v", err)
	}
}

// TestLogStartBeyondRecoveredEnd ensures a log ending below its start offset restarts empty there, as in Kafka.
func TestLogStartBeyondRecoveredEnd(t *testing.T) {
	dir, _ := recoveryFixture(t)
	opts := testOptions(dir, smallConfig())
	opts.LogStartOffset = 500
	l := openAt(t, opts)
	defer closeLog(t, l)
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || len(l.Segments()) != 1 || len(l.EpochCache().Entries()) != 0 {
		t.Fatalf("LSO %d LEO %d segments %v epochs %v", l.LogStartOffset(), l.LogEndOffset(), l.Segments(), l.EpochCache().Entries())
	}
}

func flipByte(t *testing.T, path string, at int64) {
	t.Helper()
	data := readFile(t, path)
	data[at] ^= 0x20
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
