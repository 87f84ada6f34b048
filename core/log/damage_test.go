package log

import (
	"errors"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/replicad/replicad/core/record"
)

// damageFixture is recoveryFixture with the first batch of its second
// segment damaged at rest (a flipped byte inside it, after the log was
// flushed and closed), that segment's index gone so that recovery reads it,
// and the log reopened with its recovery point at the log end. It returns
// the log, the batches written and the damaged batch's index in them.
func damageFixture(t *testing.T, cfg Config) (*Log, []record.Batch, int) {
	t.Helper()
	dir, written := recoveryFixture(t)
	l := reopen(t, dir, 1<<40)
	segs, rp := l.Segments(), l.RecoveryPoint()
	closeLog(t, l)
	second := segs[1].BaseOffset
	flipByte(t, segmentPath(dir, second, logFileSuffix), record.HeaderSize+2)
	if err := os.Remove(segmentPath(dir, second, indexFileSuffix)); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(dir, cfg)
	opts.RecoveryPoint = rp
	l = openAt(t, opts)
	t.Cleanup(func() { _ = l.Close() })
	return l, written, slices.IndexFunc(written, func(b record.Batch) bool { return b.BaseOffset() == second })
}

// A batch damaged below the recovery point is damage at rest, not a torn
// write: recovery cuts nothing. The log serves the records before it, takes
// no appends, keeps every byte on disk, and finds the damage again at the
// next restart; a repair cuts it and the log goes on from there (issue 10,
// path 9). Before, recovery truncated there and dropped the 30-odd intact,
// committed batches after it.
func TestDamageBelowTheRecoveryPointCutsNothing(t *testing.T) {
	l, written, bad := damageFixture(t, smallConfig())
	damagedAt := written[bad].BaseOffset()
	d, ok := l.Damaged()
	if !ok || d.Offset != damagedAt || !errors.Is(d.Cause, record.ErrCorrupt) {
		t.Fatalf("Damaged() = %+v, %v; want damage at %d (a bad CRC)", d, ok, damagedAt)
	}
	if l.LogEndOffset() != damagedAt {
		t.Fatalf("LEO %d, want %d: the log ends at the damage", l.LogEndOffset(), damagedAt)
	}
	if l.RecoveryPoint() != d.RecoveryPoint || d.RecoveryPoint <= damagedAt {
		t.Fatalf("recovery point %d (damage says %d), want it kept above the damage at %d", l.RecoveryPoint(), d.RecoveryPoint, damagedAt)
	}
	requireSameBatches(t, readAll(t, l, 0, 700), written[:bad])
	if _, err := l.Read(damagedAt+1, 1<<20, 1<<40); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past the damage: %v, want ErrOffsetOutOfRange", err)
	}
	segsBefore := l.Segments()
	var onDisk int64
	for _, s := range segsBefore {
		onDisk += fileSize(t, segmentPath(l.Dir(), s.BaseOffset, logFileSuffix))
	}
	var wrote int64
	for _, b := range written {
		wrote += int64(len(b))
	}
	if onDisk != wrote {
		t.Fatalf("%d bytes on disk, %d written: recovery cut something", onDisk, wrote)
	}
	if _, err := l.AppendAsLeader(newBatch("x", 1), 3); !errors.Is(err, ErrDamaged) {
		t.Fatalf("append to a damaged log: %v, want ErrDamaged", err)
	}
	if _, err := l.AppendAsFollower(written[bad]); !errors.Is(err, ErrDamaged) {
		t.Fatalf("follower append to a damaged log: %v, want ErrDamaged", err)
	}

	// A restart (the checkpointed recovery point is the log's) finds it again.
	dir, rp := l.Dir(), l.RecoveryPoint()
	closeLog(t, l)
	l = reopen(t, dir, rp)
	defer closeLog(t, l)
	if d2, ok := l.Damaged(); !ok || d2.Offset != damagedAt {
		t.Fatalf("after a restart: Damaged() = %+v, %v; want damage at %d again", d2, ok, damagedAt)
	}

	if err := l.RepairDamage(); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Damaged(); ok {
		t.Fatal("still damaged after the repair")
	}
	if l.LogEndOffset() != damagedAt || l.RecoveryPoint() > damagedAt {
		t.Fatalf("after the repair: LEO %d, RP %d; want %d and at most that", l.LogEndOffset(), l.RecoveryPoint(), damagedAt)
	}
	if len(segmentFiles(t, dir)) != len(l.Segments()) || len(l.Segments()) != 2 {
		t.Fatalf("after the repair: files %v, segments %v; want the first and the cut one", segmentFiles(t, dir), l.Segments())
	}
	if e := l.LatestEpoch(); e != written[bad-1].LeaderEpoch() {
		t.Fatalf("latest epoch %d after the repair, want %d, the last batch kept's", e, written[bad-1].LeaderEpoch())
	}
	// The leader's copy of the damaged batch goes where it was.
	if _, err := l.AppendAsFollower(written[bad]); err != nil {
		t.Fatalf("follower append after the repair: %v", err)
	}
	requireSameBatches(t, readAll(t, l, 0, 700), written[:bad+1])
}

// A truncation of a damaged log repairs it first: what it keeps is what the
// log served.
func TestTruncationOfADamagedLogRepairsIt(t *testing.T) {
	for _, below := range []int{0, 3} { // at the damage, and 3 batches below it
		l, written, bad := damageFixture(t, smallConfig())
		to := written[bad-below].BaseOffset()
		if err := l.TruncateTo(to); err != nil {
			t.Fatal(err)
		}
		if _, ok := l.Damaged(); ok {
			t.Fatal("still damaged after a truncation")
		}
		if l.LogEndOffset() != to {
			t.Fatalf("log end %d after truncating to %d", l.LogEndOffset(), to)
		}
		requireRecoveredTo(t, l, written[:bad-below])
	}
}

// With Config.TruncateDamaged, recovery does what Kafka's does: the damaged
// batch goes with everything after it.
func TestTruncateDamagedCutsAsKafkaDoes(t *testing.T) {
	cfg := smallConfig()
	cfg.TruncateDamaged = true
	l, written, bad := damageFixture(t, cfg)
	if _, ok := l.Damaged(); ok {
		t.Fatal("damaged, want truncated")
	}
	requireRecoveredTo(t, l, written[:bad])
}

// A segment missing below the recovery point is damage too: the log ends
// before the gap, and the segments after it stay on disk.
func TestGapBelowTheRecoveryPointCutsNothing(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallConfig())
	written := appendBatches(t, l, 1, 60, 3)
	closeLog(t, l)
	l = reopen(t, dir, 1<<40)
	segs, rp := l.Segments(), l.RecoveryPoint()
	closeLog(t, l)
	if len(segs) < 4 {
		t.Fatalf("segments %v, want a middle one to remove", segs)
	}
	if err := os.Remove(segmentPath(dir, segs[2].BaseOffset, logFileSuffix)); err != nil {
		t.Fatal(err)
	}
	// Segment 1's index must go too, or recovery trusts it and never
	// reads where it ends.
	if err := os.Remove(segmentPath(dir, segs[1].BaseOffset, indexFileSuffix)); err != nil {
		t.Fatal(err)
	}
	l = reopen(t, dir, rp)
	defer closeLog(t, l)
	d, ok := l.Damaged()
	if !ok || d.Offset != segs[2].BaseOffset {
		t.Fatalf("Damaged() = %+v, %v; want the gap at %d", d, ok, segs[2].BaseOffset)
	}
	if n := len(segmentFiles(t, dir)); n != len(segs)-1 {
		t.Fatalf("%d segment files, want %d: none deleted", n, len(segs)-1)
	}
	keep := slices.IndexFunc(written, func(b record.Batch) bool { return b.BaseOffset() == segs[2].BaseOffset })
	requireSameBatches(t, readAll(t, l, 0, 700), written[:keep])
}

// A segment that overlaps the damaged one (it claims a base offset below
// where the damaged one ends) serves nothing: the damaged log reads only
// from its segments up to the damage.
func TestDamagedLogReadsNoSegmentPastTheDamage(t *testing.T) {
	dir, written := recoveryFixture(t)
	l := reopen(t, dir, 1<<40)
	segs, rp := l.Segments(), l.RecoveryPoint()
	closeLog(t, l)
	last := segs[len(segs)-1].BaseOffset
	lower := last - 5 // the last segment now claims to start inside the one before it
	for _, suffix := range []string{logFileSuffix, indexFileSuffix} {
		if err := os.Rename(segmentPath(dir, last, suffix), segmentPath(dir, lower, suffix)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.Remove(segmentPath(dir, segs[len(segs)-2].BaseOffset, indexFileSuffix)); err != nil {
		t.Fatal(err)
	}
	l = reopen(t, dir, rp)
	defer closeLog(t, l)
	if d, ok := l.Damaged(); !ok || d.Offset != last {
		t.Fatalf("Damaged() = %+v, %v; want the overlap at %d", d, ok, last)
	}
	keep := slices.IndexFunc(written, func(b record.Batch) bool { return b.BaseOffset() == last })
	requireSameBatches(t, readAll(t, l, 0, 700), written[:keep])
	ri, err := l.Read(lower+1, 1<<20, last)
	if err != nil || len(ri.Data) == 0 {
		t.Fatalf("read at %d, below the damage: %v, %d bytes", lower+1, err, len(ri.Data))
	}
}

// Damage below the log start leaves the log empty at its start; the repair
// restarts it there, every offset in order.
func TestRepairOfDamageBelowTheLogStart(t *testing.T) {
	dir, written := recoveryFixture(t)
	l := reopen(t, dir, 1<<40)
	segs, rp := l.Segments(), l.RecoveryPoint()
	closeLog(t, l)
	flipByte(t, segmentPath(dir, segs[1].BaseOffset, logFileSuffix), record.HeaderSize+2)
	if err := os.Remove(segmentPath(dir, segs[1].BaseOffset, indexFileSuffix)); err != nil {
		t.Fatal(err)
	}
	start := written[len(written)-3].BaseOffset() // past the damage
	opts := testOptions(dir, smallConfig())
	opts.RecoveryPoint, opts.LogStartOffset = rp, start
	l = openAt(t, opts)
	defer closeLog(t, l)
	if d, ok := l.Damaged(); !ok || d.Offset != segs[1].BaseOffset {
		t.Fatalf("Damaged() = %+v, %v; want damage at %d", d, ok, segs[1].BaseOffset)
	}
	if l.LogStartOffset() != start || l.LogEndOffset() != start {
		t.Fatalf("start %d, end %d; want both %d", l.LogStartOffset(), l.LogEndOffset(), start)
	}
	if err := l.RepairDamage(); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.Damaged(); ok {
		t.Fatal("still damaged")
	}
	if l.LogStartOffset() != start || l.LogEndOffset() != start || l.HighWatermark() != start || l.RecoveryPoint() != start {
		t.Fatalf("after the repair: start %d, HW %d, RP %d, end %d; want all %d", l.LogStartOffset(), l.HighWatermark(),
			l.RecoveryPoint(), l.LogEndOffset(), start)
	}
	if b := appendBatches(t, l, 3, 1, 1); b[0].BaseOffset() != start {
		t.Fatalf("append after the repair at %d, want %d", b[0].BaseOffset(), start)
	}
}

// midSegmentDamage is recoveryFixture closed and then damaged at rest in the
// last batch of its middle segment, well past that segment's first index
// entry, the segment's index gone so that recovery reads it. It returns the
// dir, the recovery point to reopen with, and the damaged batch.
func midSegmentDamage(t *testing.T) (string, int64, record.Batch) {
	t.Helper()
	dir, written := recoveryFixture(t)
	l := reopen(t, dir, 1<<40)
	segs, rp := l.Segments(), l.RecoveryPoint()
	closeLog(t, l)
	var last record.Batch
	for _, b := range written {
		if b.BaseOffset() >= segs[1].BaseOffset && b.BaseOffset() < segs[2].BaseOffset {
			last = b
		}
	}
	flipByte(t, segmentPath(dir, segs[1].BaseOffset, logFileSuffix), segs[1].Size-int64(len(last))+record.HeaderSize+2)
	if err := os.Remove(segmentPath(dir, segs[1].BaseOffset, indexFileSuffix)); err != nil {
		t.Fatal(err)
	}
	return dir, rp, last
}

// Damage far into a segment leaves recovery an index rebuilt up to it. That
// index goes: a restart would trust the segment by it, unread, and serve
// the damaged batch as sound. Every restart finds the damage again.
func TestDamageIsFoundAgainAfterEveryRestart(t *testing.T) {
	dir, rp, damaged := midSegmentDamage(t)
	for restart := range 3 {
		l := reopen(t, dir, rp)
		d, ok := l.Damaged()
		if !ok || d.Offset != damaged.BaseOffset() {
			t.Fatalf("restart %d: Damaged() = %+v, %v; want damage at %d", restart, d, ok, damaged.BaseOffset())
		}
		rp = l.RecoveryPoint()
		closeLog(t, l)
	}
}

// A read of a damaged log asked for everything returns nothing from the
// damage on, though the damaged segment's bytes go on past it.
func TestDamagedLogServesNothingPastTheDamage(t *testing.T) {
	dir, rp, damaged := midSegmentDamage(t)
	l := reopen(t, dir, rp)
	defer closeLog(t, l)
	damagedAt := damaged.BaseOffset()
	for from := int64(0); from < damagedAt; {
		ri, err := l.Read(from, 1<<20, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		batches := splitBatchesUnverified(t, ri.Data)
		if len(batches) == 0 {
			t.Fatalf("nothing at %d", from)
		}
		if last := batches[len(batches)-1]; last.NextOffset() > damagedAt {
			t.Fatalf("read from %d served the batch at %d, at or past the damage at %d", from, last.BaseOffset(), damagedAt)
		}
		from = batches[len(batches)-1].NextOffset()
	}
}

// splitBatchesUnverified splits data into batches without checking them.
func splitBatchesUnverified(t *testing.T, data []byte) []record.Batch {
	t.Helper()
	var out []record.Batch
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err != nil {
			t.Fatalf("split: %v", err)
		}
		out = append(out, b)
		data = rest
	}
	return out
}
