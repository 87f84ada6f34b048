package log

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/record"
)

func ep(epoch int32, start int64) checkpoint.EpochEntry {
	return checkpoint.EpochEntry{Epoch: epoch, StartOffset: start}
}

// truncationFixture is a log of 60 batches of 3 records over several
// segments: epoch 1 holds offsets [0, 90), epoch 2 holds [90, 180).
func truncationFixture(t *testing.T) (*Log, []record.Batch) {
	t.Helper()
	l := openTestLog(t, t.TempDir(), smallConfig())
	written := appendBatches(t, l, 1, 30, 3)
	written = append(written, appendBatches(t, l, 2, 30, 3)...)
	l.UpdateHighWatermark(l.LogEndOffset())
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l, written
}

// TestTruncateTo ensures truncation keeps exactly the batches below the new LEO, trims epochs, clamps HW and lets appends resume.
func TestTruncateTo(t *testing.T) {
	cases := []struct {
		name    string
		offset  int64 // truncate to
		wantLEO int64
		epochs  []checkpoint.EpochEntry
	}{
		{"boundary in epoch 2", 150, 150, []checkpoint.EpochEntry{ep(1, 0), ep(2, 90)}},
		{"inside a batch", 151, 150, []checkpoint.EpochEntry{ep(1, 0), ep(2, 90)}},
		{"epoch 2 start", 90, 90, []checkpoint.EpochEntry{ep(1, 0)}},
		{"early segment", 10, 9, []checkpoint.EpochEntry{ep(1, 0)}},
		{"zero", 0, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, written := truncationFixture(t)
			defer closeLog(t, l)
			segsBefore := l.Segments()
			if err := l.TruncateTo(c.offset); err != nil {
				t.Fatalf("TruncateTo(%d): %v", c.offset, err)
			}
			if l.LogEndOffset() != c.wantLEO || l.HighWatermark() != c.wantLEO || l.RecoveryPoint() != c.wantLEO {
				t.Fatalf("LEO %d HW %d RP %d, want all %d", l.LogEndOffset(), l.HighWatermark(), l.RecoveryPoint(), c.wantLEO)
			}
			if got := l.EpochCache().Entries(); !slices.Equal(got, c.epochs) {
				t.Fatalf("epochs %v, want %v", got, c.epochs)
			}
			requireSameBatches(t, readAll(t, l, 0, 1000), written[:c.wantLEO/3])

			segs := l.Segments()
			for _, s := range segsBefore[len(segs):] {
				if _, err := os.Stat(segmentPath(l.Dir(), s.BaseOffset, logFileSuffix)); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("segment %d still on disk: %v", s.BaseOffset, err)
				}
			}
			if last := segs[len(segs)-1]; last.BaseOffset > c.wantLEO || len(segmentFiles(t, l.Dir())) != len(segs) {
				t.Fatalf("segments %v after truncating to %d", segs, c.wantLEO)
			}

			more := appendBatches(t, l, 3, 20, 3)
			if more[0].BaseOffset() != c.wantLEO {
				t.Fatalf("append after truncation at %d, want %d", more[0].BaseOffset(), c.wantLEO)
			}
			requireSameBatches(t, readAll(t, l, 0, 1000), append(slices.Clone(written[:c.wantLEO/3]), more...))
		})
	}
}

// TestTruncateToAtOrBeyondLEO ensures truncating at or past the LEO changes nothing.
func TestTruncateToAtOrBeyondLEO(t *testing.T) {
	l, written := truncationFixture(t)
	defer closeLog(t, l)
	for _, off := range []int64{180, 500} {
		if err := l.TruncateTo(off); err != nil {
			t.Fatal(err)
		}
	}
	if l.LogEndOffset() != 180 || l.HighWatermark() != 180 {
		t.Fatalf("LEO %d HW %d", l.LogEndOffset(), l.HighWatermark())
	}
	requireSameBatches(t, readAll(t, l, 0, 1000), written)
}

// TestTruncateThenReopen ensures a truncation survives a restart.
func TestTruncateThenReopen(t *testing.T) {
	l, written := truncationFixture(t)
	if err := l.TruncateTo(100); err != nil {
		t.Fatal(err)
	}
	dir := l.Dir()
	closeLog(t, l)
	l = openTestLog(t, dir, smallConfig()) // recovery point 0: everything re-read
	defer closeLog(t, l)
	if l.LogEndOffset() != 99 {
		t.Fatalf("LEO %d after reopen, want 99", l.LogEndOffset())
	}
	requireSameBatches(t, readAll(t, l, 0, 1000), written[:33])
}

// TestTruncateFullyAndStartAt ensures the log restarts empty at the offset: one segment, every offset there, no epochs.
func TestTruncateFullyAndStartAt(t *testing.T) {
	l, _ := truncationFixture(t)
	defer closeLog(t, l)
	if err := l.TruncateFullyAndStartAt(1000); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 1000 || l.LogEndOffset() != 1000 || l.HighWatermark() != 1000 || l.RecoveryPoint() != 1000 {
		t.Fatalf("LSO %d LEO %d HW %d RP %d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.RecoveryPoint())
	}
	if segs := l.Segments(); len(segs) != 1 || segs[0] != (SegmentInfo{BaseOffset: 1000}) {
		t.Fatalf("segments %v", segs)
	}
	if names := segmentFiles(t, l.Dir()); !slices.Equal(names, []string{"00000000000000001000.log"}) {
		t.Fatalf("files %v", names)
	}
	if len(l.EpochCache().Entries()) != 0 {
		t.Fatalf("epochs %v", l.EpochCache().Entries())
	}
	if _, err := l.Read(5, 100, 2000); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below start = %v", err)
	}
	more := appendBatches(t, l, 9, 3, 2)
	requireSameBatches(t, readAll(t, l, 1000, 1000), more)

	// Truncating below the log start restarts the log there, as in Kafka.
	if err := l.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 10 || l.LogEndOffset() != 10 {
		t.Fatalf("after truncating below start: LSO %d LEO %d", l.LogStartOffset(), l.LogEndOffset())
	}
}
