package log

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// Regression tests for what the power-loss simulation (core/crashtest)
// found in this package: each builds the situation once per seed on a
// simulated disk, cuts the power, and checks what recovery makes of it.

const powerCuts = 64

func cutRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 7)) }

// openOnDisk opens the log at /p on fsys, its directory made durable.
func openOnDisk(t *testing.T, fsys *crashfs.FS, cfg Config, recoveryPoint int64) *Log {
	t.Helper()
	opts := testOptions("/p", cfg)
	opts.FS, opts.SyncMetadata, opts.RecoveryPoint = fsys, true, recoveryPoint
	return openAt(t, opts)
}

// appendAsLeader appends n batches of records records each at epoch.
func appendAsLeader(t *testing.T, l *Log, n int, tag string, records int, epoch int32) {
	t.Helper()
	for range n {
		if _, err := l.AppendAsLeader(newBatch(tag, records), epoch); err != nil {
			t.Fatal(err)
		}
	}
}

// checkContiguous reads the whole log batch by batch: each read must start
// with the batch at the offset asked for.
func checkContiguous(t *testing.T, seed uint64, l *Log) {
	t.Helper()
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		info, err := l.Read(off, 1, math.MaxInt64)
		if err != nil {
			t.Fatalf("seed %d: read at %d: %v", seed, off, err)
		}
		if len(info.Data) == 0 {
			t.Fatalf("seed %d: nothing at %d below the log end %d", seed, off, l.LogEndOffset())
		}
		batch := splitBatches(t, info.Data)[0]
		if batch.BaseOffset() != off {
			t.Fatalf("seed %d: read at %d returned the batch at %d: a gap in the log", seed, off, batch.BaseOffset())
		}
		off = batch.NextOffset()
	}
}

// TestTruncationRemovesSegmentsDurablyFirst ensures a power loss after a truncation that removed segments never leaves the cut segment with the removed ones after it (crashtest every-batch seed 58: recovery trusted the cut segment below the stale recovery point and served a gap).
func TestTruncationRemovesSegmentsDurablyFirst(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes, cfg.FlushPolicy = 300, FlushEveryBatch
	for seed := range uint64(powerCuts) {
		fsys := crashfs.New()
		l := openOnDisk(t, fsys, cfg, 0)
		for i := range 8 {
			if _, err := l.AppendAsLeader(newBatch("batch-with-a-longer-tag", 2+i%3), 1); err != nil {
				t.Fatal(err)
			}
		}
		if len(l.Segments()) < 3 {
			t.Fatalf("%d segments, want several", len(l.Segments()))
		}
		checkpointed := l.RecoveryPoint() // what the owner's checkpoint still says
		// The power goes as the truncation writes the trimmed epoch cache,
		// whose directory fsync would have made the removals durable.
		cutAt(fsys, crashfs.OpOpen, EpochCheckpointFile+".tmp", seed)
		if err := l.TruncateTo(1); err == nil {
			t.Fatal("the truncation outlived the power")
		}
		recovered := openOnDisk(t, fsys.PowerCut(), cfg, checkpointed)
		checkContiguous(t, seed, recovered)
	}
}

// cutAt makes the power go at the first operation on a file whose name ends in suffix.
func cutAt(fsys *crashfs.FS, kind crashfs.OpKind, suffix string, seed uint64) {
	fsys.SetFault(func(op crashfs.Op) error {
		if op.Kind == kind && strings.HasSuffix(op.Path, suffix) {
			fsys.CutPower(cutRng(seed))
		}
		return nil
	})
}

// TestFullTruncationCutBeforeItsSegmentClearsEpochs ensures a log whose full truncation lost power between removing the old segments and creating the new one comes back without the old epochs (crashtest os seed 111: entries past the empty log's end).
func TestFullTruncationCutBeforeItsSegmentClearsEpochs(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 300
	for seed := range uint64(powerCuts) {
		fsys := crashfs.New()
		l := openOnDisk(t, fsys, cfg, 0)
		for i := range 4 {
			if _, err := l.AppendAsLeader(newBatch("batch-with-a-longer-tag", 3), int32(1+i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		cutAt(fsys, crashfs.OpOpen, "00000000000000000020.log", seed)
		if err := l.TruncateFullyAndStartAt(20); err == nil {
			t.Fatal("the truncation outlived the power")
		}
		recovered := openOnDisk(t, fsys.PowerCut(), cfg, l.RecoveryPoint())
		entries := recovered.EpochCache().Entries()
		if recovered.LogEndOffset() == recovered.LogStartOffset() && len(entries) != 0 {
			t.Fatalf("seed %d: empty log at %d keeps epoch entries %v", seed, recovered.LogEndOffset(), entries)
		}
		for _, e := range entries {
			if e.StartOffset > recovered.LogEndOffset() {
				t.Fatalf("seed %d: log ending at %d keeps epoch entry %v", seed, recovered.LogEndOffset(), e)
			}
		}
		checkEpochs(t, seed, recovered)
	}
}

// checkEpochs fails when a batch's epoch is not the one the cache gives its offset.
func checkEpochs(t *testing.T, seed uint64, l *Log) {
	t.Helper()
	info, err := l.Read(l.LogStartOffset(), math.MaxInt32, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range splitBatches(t, info.Data) {
		if got := l.EpochCache().EpochForOffset(b.BaseOffset()); got != b.LeaderEpoch() {
			t.Fatalf("seed %d: batch at %d has epoch %d, the cache %v says %d", seed, b.BaseOffset(), b.LeaderEpoch(), l.EpochCache().Entries(), got)
		}
	}
}

// TestUnsyncedTruncationCannotComeBackUnderNewEpochs ensures a truncation is durable before the epoch cache forgets the truncated epochs (crashtest os seed 77: the cut undid the truncation, and the old batch of epoch 1 came back under the cache's entry for epoch 2).
func TestUnsyncedTruncationCannotComeBackUnderNewEpochs(t *testing.T) {
	cfg := smallConfig()
	for seed := range uint64(powerCuts) {
		fsys := crashfs.New()
		l := openOnDisk(t, fsys, cfg, 0)
		appendAsLeader(t, l, 2, "epoch-one", 2, 1)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(0); err != nil { // a follower of a new leader
			t.Fatal(err)
		}
		b := newBatch("epoch-two", 3)
		b.SetLeaderEpoch(2)
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
		// The owner checkpointed the lowered recovery point: 0.
		checkEpochs(t, seed, openOnDisk(t, fsys.CutPower(cutRng(seed)), cfg, 0))
	}
}

// TestLogWithNoSegmentRestartsAtItsRecoveryPoint ensures a log whose segments a cut full truncation all removed restarts no lower than its checkpointed recovery point, which the log-start checkpoint may lag (crashtest interval seed 2047: the log came back at 0 under a recovery point of 9).
func TestLogWithNoSegmentRestartsAtItsRecoveryPoint(t *testing.T) {
	opts := testOptions(t.TempDir(), smallConfig()) // the partition dir, empty
	opts.RecoveryPoint = 12
	l := openAt(t, opts)
	defer closeLog(t, l)
	if l.LogEndOffset() != 12 || l.LogStartOffset() != 12 {
		t.Fatalf("log restarted at [%d, %d), want at the recovery point 12", l.LogStartOffset(), l.LogEndOffset())
	}
}

// TestSegmentsDroppedByRecoveryStayDropped ensures the segments recovery deletes after a corrupt tail do not come back after a later power loss, over the records appended since (crashtest every-batch seed 15752: a deleted segment 26 back after a segment ending at 27).
func TestSegmentsDroppedByRecoveryStayDropped(t *testing.T) {
	small, large := smallConfig(), smallConfig()
	small.SegmentBytes, large.SegmentBytes = 300, 1<<20
	small.FlushPolicy, large.FlushPolicy = FlushEveryBatch, FlushEveryBatch
	for seed := range uint64(powerCuts) {
		fsys := crashfs.New()
		l := openOnDisk(t, fsys, small, 0)
		appendAsLeader(t, l, 6, "old-batch-with-a-longer-tag", 3, 1)
		segs := l.Segments()
		closeLog(t, l)
		if len(segs) < 3 {
			t.Fatalf("%d segments, want 3 or more", len(segs))
		}
		// The second segment's tail is torn: recovery cuts it and deletes
		// the segments after it.
		f, err := fsys.OpenFile(segmentPath("/p", segs[1].BaseOffset, logFileSuffix), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("torn"), segs[1].Size-10); err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(f.Sync(), f.Close(), fsys.SyncFS("/")); err != nil {
			t.Fatal(err)
		}
		l = openOnDisk(t, fsys, large, segs[1].BaseOffset)
		var want []record.Batch
		for l.LogEndOffset() <= segs[len(segs)-1].BaseOffset+3 {
			// The same epoch: a new one's checkpoint would fsync the directory.
			b := newBatch("new", 3)
			if _, err := l.AppendAsLeader(b, 1); err != nil {
				t.Fatal(err)
			}
			want = append(want, bytes.Clone(b))
		}
		recovered := openOnDisk(t, fsys.CutPower(cutRng(seed)), large, l.RecoveryPoint())
		for _, b := range want {
			info, err := recovered.Read(b.BaseOffset(), 1, math.MaxInt64)
			if err != nil {
				t.Fatalf("seed %d: read at %d: %v", seed, b.BaseOffset(), err)
			}
			if got := splitBatches(t, info.Data)[0]; !bytes.Equal(got, b) {
				t.Fatalf("seed %d: at %d a deleted segment's batch came back over the flushed one", seed, b.BaseOffset())
			}
		}
	}
}

// TestTruncationCheckpointsItsRecoveryPointBeforeItCuts ensures a power loss
// in the middle of a truncation's cut, which can leave the page it cut
// torn or zeroed under the file's old size, finds the owner's checkpoint
// already below the cut: recovery reads the page and cuts it as a torn
// tail, instead of finding it below the recovery point and taking it for
// damage at rest (crashtest every-batch seed 58, os seed 95: the owner
// checkpointed after the truncation, as Kafka does).
func TestTruncationCheckpointsItsRecoveryPointBeforeItCuts(t *testing.T) {
	cfg := smallConfig()
	cfg.FlushPolicy = FlushEveryBatch
	for seed := range uint64(powerCuts) {
		fsys := crashfs.New()
		var l *Log
		var checkpointed int64 // the owner's recovery-point checkpoint
		opts := testOptions("/p", cfg)
		opts.FS, opts.SyncMetadata = fsys, true
		opts.OnRecoveryPointLowered = func() error { checkpointed = l.RecoveryPoint(); return nil }
		l = openAt(t, opts)
		appendAsLeader(t, l, 6, "batch-with-a-longer-tag", 3, 1)
		checkpointed = l.RecoveryPoint()
		// The power goes at the fsync of the cut.
		cutAt(fsys, crashfs.OpSync, logFileSuffix, seed)
		if err := l.TruncateTo(7); err == nil {
			t.Fatal("the truncation outlived the power")
		}
		if checkpointed > 6 {
			t.Errorf("seed %d: the checkpoint says %d as the cut is made, want at most 6", seed, checkpointed)
		}
		recovered := openOnDisk(t, fsys.PowerCut(), cfg, checkpointed)
		if d, ok := recovered.Damaged(); ok {
			t.Errorf("seed %d: a power cut in a truncation left damage at %d (recovery point %d): %v", seed, d.Offset, d.RecoveryPoint, d.Cause)
		}
		checkContiguous(t, seed, recovered)
	}
}

// TestRecoveryCutOfATornTailIsDurable ensures the torn tail recovery cuts
// stays cut through a power loss right after Open: new records may go to a
// new segment and move the recovery point past this one, and a restart
// would then trust the segment unread, torn bytes and all (crashtest
// every-batch seed 35081).
func TestRecoveryCutOfATornTailIsDurable(t *testing.T) {
	cfg := smallConfig()
	cfg.FlushPolicy = FlushEveryBatch
	for seed := range uint64(powerCuts) {
		fsys := crashfs.New()
		l := openOnDisk(t, fsys, cfg, 0)
		appendAsLeader(t, l, 3, "batch-with-a-longer-tag", 3, 1)
		checkpointed := l.RecoveryPoint()
		// The power goes at the fsync of the next append: its pages may
		// come back torn.
		cutAt(fsys, crashfs.OpSync, logFileSuffix, seed)
		if _, err := l.AppendAsLeader(newBatch("torn", 20), 1); err == nil {
			t.Fatal("the append outlived the power")
		}
		after := fsys.PowerCut()
		recovered := openOnDisk(t, after, cfg, checkpointed)
		segs := recovered.Segments()
		last := segmentPath("/p", segs[len(segs)-1].BaseOffset, logFileSuffix)
		// The power goes again at once.
		again := after.CutPower(cutRng(seed + 1000))
		data, err := again.ReadFile(last)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != segs[len(segs)-1].Size {
			t.Errorf("seed %d: recovery cut %s to %d bytes, a power loss brought back %d", seed, last, segs[len(segs)-1].Size, len(data))
		}
	}
}

// TestPowerLossDuringProducerSnapshot cuts the power at every operation of
// a close (which writes the snapshot) and of rolls (whose sealer writes
// one): the reopened log's producer state is always what its batches say,
// and no temporary file survives.
func TestPowerLossDuringProducerSnapshot(t *testing.T) {
	snapshotEveryClose(t)
	cfg := smallConfig()
	cfg.SegmentBytes, cfg.FlushPolicy = 400, FlushEveryBatch
	build := func() (*crashfs.FS, *Log) {
		fsys := crashfs.New()
		l := openOnDisk(t, fsys, cfg, 0)
		for i := range 12 {
			if _, err := l.AppendAsLeader(pbatch(int64(1+i%2), 0, int32(i/2*2), 2, 100), 1); err != nil {
				t.Fatal(err)
			}
		}
		waitSnapshots(t, l)
		return fsys, l
	}
	fsys, l := build()
	want := l.ProducerState()
	before := fsys.Ops()
	closeLog(t, l)
	closeOps := fsys.Ops() - before
	if closeOps < 5 {
		t.Fatalf("close took %d operations", closeOps)
	}
	for n := range closeOps + 1 {
		fsys, l := build()
		fsys.CutPowerAfter(n, cutRng(uint64(n)))
		_ = l.Close()
		after := fsys.PowerCut()
		if after == nil {
			after = fsys.CutPower(cutRng(uint64(n)))
		}
		r := openOnDisk(t, after, cfg, 0)
		if got := r.ProducerState(); !got.Equal(want) {
			t.Fatalf("cut after %d ops of the close: state %v, want %v", n, got.Describe(0), want.Describe(0))
		}
		entries, err := after.ReadDir("/p")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if len(e.Name()) > 4 && e.Name()[len(e.Name())-4:] == ".tmp" {
				t.Fatalf("cut after %d: %s left behind", n, e.Name())
			}
		}
	}
	// Cuts during appends that roll: the background snapshot writes race
	// the cut.
	for seed := range uint64(powerCuts) {
		fsys := crashfs.New()
		l := openOnDisk(t, fsys, cfg, 0)
		fsys.CutPowerAfter(int64(seed*3), cutRng(seed))
		for i := range 16 {
			if _, err := l.AppendAsLeader(pbatch(int64(1+i%2), 0, int32(i/2*2), 2, 100), 1); err != nil {
				break
			}
		}
		after := fsys.PowerCut()
		if after == nil {
			after = fsys.CutPower(cutRng(seed))
		}
		r := openOnDisk(t, after, cfg, 0)
		checkState(t, fmt.Sprintf("seed %d", seed), r)
	}
}
