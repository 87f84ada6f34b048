package log

import (
	"errors"
	"testing"
	"time"

	"github.com/replicad/replicad/core/record"
)

// IncrementLogStartOffset raises the log start up to the HW, refuses reads
// below it, deletes the segments holding only records below it (never the
// active one), and makes the new start durable before deleting anything.
func TestIncrementLogStartOffset(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, smallConfig())
	var l *Log
	checkpointed := int64(-1)
	segmentsAtCheckpoint := 0
	opts.OnRecoveryPointLowered = func() error {
		checkpointed = l.LogStartOffset()
		segmentsAtCheckpoint = len(segmentFiles(t, dir))
		return nil
	}
	l = openAt(t, opts)
	defer func() { closeLog(t, l) }()
	batches := appendBatches(t, l, 1, 40, 5) // 200 records over several 2 KiB segments
	if l.SegmentCount() < 4 {
		t.Fatalf("%d segments, want several", l.SegmentCount())
	}
	l.UpdateHighWatermark(150)

	if _, err := l.IncrementLogStartOffset(151); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("a log start above the HW: %v, want ErrOffsetOutOfRange", err)
	}
	before, files := l.SegmentCount(), len(segmentFiles(t, dir))
	raised, err := l.IncrementLogStartOffset(120)
	if err != nil || !raised {
		t.Fatalf("IncrementLogStartOffset(120): %v, %v", raised, err)
	}
	if l.LogStartOffset() != 120 || checkpointed != 120 || segmentsAtCheckpoint != files {
		t.Fatalf("log start %d, checkpointed %d with %d of %d segment files left; want 120, 120 before any deletion",
			l.LogStartOffset(), checkpointed, segmentsAtCheckpoint, files)
	}
	if l.SegmentCount() >= before || len(segmentFiles(t, dir)) != l.SegmentCount() {
		t.Fatalf("%d segments (%d files) after, %d before: the ones below the log start were not deleted",
			l.SegmentCount(), len(segmentFiles(t, dir)), before)
	}
	if first := l.segmentList()[0].baseOffset; first > 120 {
		t.Fatalf("the first segment starts at %d, after the log start 120: records above it were deleted", first)
	}
	if _, err := l.Read(119, 1<<20, l.LogEndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("a read below the log start: %v, want ErrOffsetOutOfRange", err)
	}
	// Everything from the batch holding 120 on is intact.
	var want = batches[120/5:]
	requireSameBatches(t, readAll(t, l, 120, 1<<20), want)
	if e, ok := l.epochs.EarliestEntry(); !ok || e.StartOffset != 120 {
		t.Fatalf("earliest epoch entry %+v, want one starting at the log start", e)
	}
	if raised, err := l.IncrementLogStartOffset(100); raised || err != nil || l.LogStartOffset() != 120 {
		t.Fatalf("a lower log start: raised %v, %v, log start %d; want nothing changed", raised, err, l.LogStartOffset())
	}
	// Up to the HW at the LEO: only the active segment is left.
	l.UpdateHighWatermark(l.LogEndOffset())
	if _, err := l.IncrementLogStartOffset(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	if l.SegmentCount() != 1 {
		t.Fatalf("%d segments with the log start at the LEO, want the active one", l.SegmentCount())
	}
	appendBatches(t, l, 1, 1, 1)

	// A log reopened with the checkpointed start serves from it.
	start := l.LogStartOffset()
	closeLog(t, l)
	opts.OnRecoveryPointLowered = nil
	opts.LogStartOffset = start
	l = openAt(t, opts)
	if l.LogStartOffset() != start {
		t.Fatalf("reopened at log start %d, want %d", l.LogStartOffset(), start)
	}
}

// A crash between the checkpoint and the deletion leaves segments below
// the log start (and epochs before it): the next open removes them.
func TestOpenFinishesAnInterruptedLogStartRaise(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, smallConfig())
	l := openAt(t, opts)
	appendBatches(t, l, 1, 40, 5)
	appendBatches(t, l, 2, 10, 5)
	l.UpdateHighWatermark(l.LogEndOffset())
	before := l.SegmentCount()
	closeLog(t, l)
	// As if the checkpoint said 220 and the process died before deleting.
	opts.LogStartOffset = 220
	l = openAt(t, opts)
	defer func() { closeLog(t, l) }()
	if l.SegmentCount() >= before || len(segmentFiles(t, dir)) != l.SegmentCount() {
		t.Fatalf("%d segments before, %d after reopening at log start 220: the leftovers stayed", before, l.SegmentCount())
	}
	if first := l.segmentList()[0].baseOffset; first > 220 {
		t.Fatalf("the first segment starts at %d, after the log start", first)
	}
	if e, ok := l.epochs.EarliestEntry(); !ok || e.StartOffset != 220 || e.Epoch != 2 {
		t.Fatalf("earliest epoch entry %+v, want epoch 2 from 220", e)
	}
}

// A failed checkpoint leaves the segments; a retry with the same offset
// checkpoints again before deleting them.
func TestIncrementLogStartOffsetRetriesTheCheckpoint(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, smallConfig())
	calls, fail := 0, true
	opts.OnRecoveryPointLowered = func() error {
		calls++
		if fail {
			return errors.New("disk says no")
		}
		return nil
	}
	l := openAt(t, opts)
	defer func() { closeLog(t, l) }()
	appendBatches(t, l, 1, 40, 5)
	l.UpdateHighWatermark(l.LogEndOffset())
	before := l.SegmentCount()
	if _, err := l.IncrementLogStartOffset(150); err == nil {
		t.Fatal("a failed checkpoint was not reported")
	}
	if l.SegmentCount() != before {
		t.Fatalf("segments deleted although the log start was not made durable")
	}
	fail = false
	if raised, err := l.IncrementLogStartOffset(150); err != nil || raised {
		t.Fatalf("retry: raised %v, %v", raised, err)
	}
	if calls != 2 || l.SegmentCount() >= before {
		t.Fatalf("retry: %d checkpoints, %d segments of %d; want a second checkpoint, then the deletion", calls, l.SegmentCount(), before)
	}
}

// RetentionStart keeps a prefix of whole segments by time (the newest
// record in each) and by size, never the active segment, never past the HW,
// and knows the timestamps of segments opened from disk too.
func TestRetentionStart(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(dir, smallConfig())
	l := openAt(t, opts)
	appendAt := func(ts int64, n int) {
		for range n {
			b := record.Build([]record.Record{{TimestampMs: ts, Value: []byte("0123456789")}, {TimestampMs: ts, Value: []byte("x")}}, ts)
			if _, err := l.AppendAsLeader(b, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	appendAt(1000, 40)
	oldEnd := l.LogEndOffset()
	appendAt(5000, 40)
	if _, err := l.RetentionStart(0, Retention{Ms: -1, Bytes: -1}); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log, name string) {
		t.Helper()
		// Nothing is committed yet: nothing goes.
		l.UpdateHighWatermark(0)
		if s, err := l.RetentionStart(6000, Retention{Ms: 2000, Bytes: -1}); err != nil || s != 0 {
			t.Fatalf("%s: with the HW at 0, retention start %d (%v), want 0", name, s, err)
		}
		l.UpdateHighWatermark(l.LogEndOffset())
		s, err := l.RetentionStart(6000, Retention{Ms: 2000, Bytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		// Every segment holding only the old records goes, not the one
		// holding the first new one.
		// s is a segment's base at or below the first new record, and that
		// segment holds it: the next one starts after it.
		segs := l.segmentList()
		i := 0
		for i < len(segs) && segs[i].baseOffset != s {
			i++
		}
		if s > oldEnd || i == len(segs) || (i+1 < len(segs) && segs[i+1].baseOffset <= oldEnd) {
			t.Fatalf("%s: retention by time starts at %d, want the base of the segment holding offset %d", name, s, oldEnd)
		}
		if s2, _ := l.RetentionStart(6000, Retention{Ms: 10000, Bytes: -1}); s2 != 0 {
			t.Fatalf("%s: nothing older than 10 s, yet retention start %d", name, s2)
		}
		// By size: what is left is at least the limit.
		var total int64
		for _, sg := range l.segmentList() {
			total += sg.size.Load()
		}
		s3, _ := l.RetentionStart(0, Retention{Ms: -1, Bytes: total / 3})
		var kept int64
		for _, sg := range l.segmentList() {
			if sg.baseOffset >= s3 {
				kept += sg.size.Load()
			}
		}
		if s3 == 0 || kept < total/3 || kept > total/3+int64(smallConfig().SegmentBytes) {
			t.Fatalf("%s: retention by size %d of %d bytes starts at %d, keeping %d", name, total/3, total, s3, kept)
		}
		// Everything old by both: still the active segment stays.
		if s4, _ := l.RetentionStart(1<<40, Retention{Ms: 0, Bytes: 0}); s4 != l.activeSegment().baseOffset {
			t.Fatalf("%s: retention of everything starts at %d, want the active segment's base %d", name, s4, l.activeSegment().baseOffset)
		}
	}
	check(l, "appended")
	closeLog(t, l)
	l = openAt(t, opts) // the timestamps are read back from the segments
	defer func() { closeLog(t, l) }()
	check(l, "reopened")
}

// The checkpoint of a raised log start runs with no lock of the log held:
// an fsynced append completes while it is under way.
func TestIncrementLogStartOffsetDoesNotBlockAppends(t *testing.T) {
	cfg := smallConfig()
	cfg.FlushPolicy = FlushEveryBatch
	opts := testOptions(t.TempDir(), cfg)
	var l *Log
	appended := make(chan error, 1)
	opts.OnRecoveryPointLowered = func() error {
		go func() {
			_, err := l.AppendAsLeader(newBatch("during", 1), 1)
			appended <- err
		}()
		select {
		case err := <-appended:
			return err
		case <-time.After(5 * time.Second):
			return errors.New("an append waited for the log start checkpoint")
		}
	}
	l = openAt(t, opts)
	defer func() { closeLog(t, l) }()
	appendBatches(t, l, 1, 40, 5)
	l.UpdateHighWatermark(l.LogEndOffset())
	if _, err := l.IncrementLogStartOffset(100); err != nil {
		t.Fatal(err)
	}
}
