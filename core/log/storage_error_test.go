package log

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// failures records what a log reports through Options.OnStorageError.
type failures struct {
	mu   sync.Mutex
	errs []error
}

func (f *failures) report(err error) { f.mu.Lock(); f.errs = append(f.errs, err); f.mu.Unlock() }
func (f *failures) count() int       { f.mu.Lock(); defer f.mu.Unlock(); return len(f.errs) }

func openReporting(t *testing.T, fsys *crashfs.FS, cfg Config, rep *failures) *Log {
	t.Helper()
	opts := testOptions("/p", cfg)
	opts.FS, opts.SyncMetadata, opts.OnStorageError = fsys, true, rep.report
	return openAt(t, opts)
}

// failOnce fails the first operation of kind on a path containing name.
func failOnce(fsys *crashfs.FS, kind crashfs.OpKind, name string, err error) {
	failTimes(fsys, kind, name, err, 1)
}

// failTimes fails the first n operations of kind on a path containing name.
func failTimes(fsys *crashfs.FS, kind crashfs.OpKind, name string, err error, n int) {
	var mu sync.Mutex
	fsys.SetFault(func(op crashfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if op.Kind == kind && strings.Contains(op.Path, name) && n > 0 {
			n--
			return err
		}
		return nil
	})
}

// After a failed fsync Linux may report the next one as success (the dirty
// pages were marked clean: "fsyncgate"), so a log must never count data as
// durable once an fsync failed: every later flush, append and truncation
// fails, the recovery point stays below the failure, and the failure is
// reported once, for the owner to take the log dir offline (issue 10, path 3).
func TestFailedFsyncFailsTheLogForGood(t *testing.T) {
	for _, policy := range []FlushPolicy{FlushEveryBatch, FlushInterval, FlushOS} {
		fsys := crashfs.New()
		rep := &failures{}
		cfg := smallConfig()
		cfg.FlushPolicy = policy
		l := openReporting(t, fsys, cfg, rep)
		appendBatches(t, l, 1, 2, 1)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		rp := l.RecoveryPoint()
		failOnce(fsys, crashfs.OpSync, ".log", syscall.EIO)
		_, err := l.AppendAsLeader(newBatch("lost", 1), 1)
		if policy == FlushEveryBatch {
			if !errors.Is(err, ErrStorage) {
				t.Fatalf("%v: append whose fsync failed: %v, want ErrStorage", policy, err)
			}
		} else if err := l.Flush(); !errors.Is(err, ErrStorage) {
			t.Fatalf("%v: flush whose fsync failed: %v, want ErrStorage", policy, err)
		}
		fsys.SetFault(nil) // the next fsync would report success
		if _, err := l.AppendAsLeader(newBatch("after", 1), 1); !errors.Is(err, ErrStorage) {
			t.Fatalf("%v: append after a failed fsync: %v, want ErrStorage", policy, err)
		}
		if err := l.Flush(); !errors.Is(err, ErrStorage) {
			t.Fatalf("%v: flush after a failed fsync: %v, want ErrStorage", policy, err)
		}
		if err := l.TruncateTo(1); !errors.Is(err, ErrStorage) {
			t.Fatalf("%v: truncate after a failed fsync: %v, want ErrStorage", policy, err)
		}
		if got := l.RecoveryPoint(); got != rp {
			t.Fatalf("%v: recovery point %d, want %d: nothing after the failed fsync is durable", policy, got, rp)
		}
		if n := rep.count(); n != 1 {
			t.Fatalf("%v: %d failures reported, want 1", policy, n)
		}
		_ = l.Close()
	}
}

// A failed truncation leaves the segment list and the log end offset in
// agreement (the segments left end where the log says), and fails the log.
func TestFailedTruncationKeepsSegmentsAndLogEndInAgreement(t *testing.T) {
	fsys := crashfs.New()
	rep := &failures{}
	l := openReporting(t, fsys, smallConfig(), rep)
	appendBatches(t, l, 1, 60, 4) // many segments of 2 KiB
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	// The removal of the third segment from the end fails (the two after
	// it are gone by then: removals go newest first).
	victim := segs[len(segs)-3].BaseOffset
	failOnce(fsys, crashfs.OpRemove, segmentPath("/p", victim, logFileSuffix), syscall.EIO)
	if err := l.TruncateTo(segs[1].BaseOffset); !errors.Is(err, ErrStorage) {
		t.Fatalf("truncate with a failed removal: %v, want ErrStorage", err)
	}
	left := l.Segments()
	if last := left[len(left)-1]; last.BaseOffset >= victim {
		t.Fatalf("segments left %+v, want none from %d on", left, victim)
	}
	if got := l.LogEndOffset(); got != victim {
		t.Fatalf("log end offset %d, want %d, where the segments left end", got, victim)
	}
	if rep.count() != 1 {
		t.Fatalf("%d failures reported, want 1", rep.count())
	}
	if _, err := l.AppendAsLeader(newBatch("after", 1), 1); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after a failed truncation: %v, want ErrStorage", err)
	}
}

// Running out of file descriptors is not a fault of the disk: the append
// that needed a file fails, the log is not failed, nothing is reported, and
// the next append, once a descriptor is free, goes through.
func TestOutOfDescriptorsDoesNotFailTheLog(t *testing.T) {
	fsys := crashfs.New()
	rep := &failures{}
	l := openReporting(t, fsys, smallConfig(), rep)
	appendBatches(t, l, 1, 1, 4)
	var mu sync.Mutex
	failing := true
	fsys.SetFault(func(op crashfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		if failing && op.Kind == crashfs.OpOpen {
			return syscall.EMFILE
		}
		return nil
	})
	var err error
	leo := l.LogEndOffset()
	for range 20 { // until a roll (or an index file) needs a descriptor
		leo = l.LogEndOffset()
		if _, err = l.AppendAsLeader(newBatch("x", 4), 1); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrFileLimit) || errors.Is(err, ErrStorage) {
		t.Fatalf("append without a descriptor: %v, want ErrFileLimit and no storage error", err)
	}
	if l.LogEndOffset() != leo || l.Failed() != nil {
		t.Fatalf("after the failed append: LEO %d (was %d), failed %v; want the log as it was", l.LogEndOffset(), leo, l.Failed())
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if _, err := l.AppendAsLeader(newBatch("y", 4), 1); err != nil {
		t.Fatalf("append once descriptors are back: %v", err)
	}
	if rep.count() != 0 {
		t.Fatalf("%d failures reported for running out of descriptors", rep.count())
	}
}

// A full truncation (a follower restarting at the leader's log start) that
// fails partway leaves a log that ends where its segments do, and fails it.
func TestFailedFullTruncationKeepsSegmentsAndLogEndInAgreement(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(segs []SegmentInfo) (crashfs.OpKind, string)
	}{
		{"removal", func(segs []SegmentInfo) (crashfs.OpKind, string) {
			return crashfs.OpRemove, segmentPath("/p", segs[1].BaseOffset, logFileSuffix)
		}},
		{"new segment", func(segs []SegmentInfo) (crashfs.OpKind, string) {
			return crashfs.OpOpen, segmentPath("/p", 1000, logFileSuffix)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := crashfs.New()
			rep := &failures{}
			l := openReporting(t, fsys, smallConfig(), rep)
			appendBatches(t, l, 1, 40, 4)
			segs := l.Segments()
			kind, path := tc.fault(segs)
			failOnce(fsys, kind, path, syscall.EIO)
			if err := l.TruncateFullyAndStartAt(1000); !errors.Is(err, ErrStorage) {
				t.Fatalf("full truncation with a failure: %v, want ErrStorage", err)
			}
			left := l.Segments()
			leo, start := l.LogEndOffset(), l.LogStartOffset()
			if start > leo || l.HighWatermark() > leo || l.RecoveryPoint() > leo {
				t.Fatalf("offsets out of order: start %d, HW %d, RP %d, LEO %d", start, l.HighWatermark(), l.RecoveryPoint(), leo)
			}
			if leo > start {
				// Records are left: they must be the segments left, whole.
				if want := segs[len(left)].BaseOffset; leo != want {
					t.Fatalf("log end %d, want %d, where the %d segments left end", leo, want, len(left))
				}
				if _, err := l.Read(start, 1<<20, leo); err != nil {
					t.Fatalf("read of what is left: %v", err)
				}
			}
			if rep.count() != 1 {
				t.Fatalf("%d failures reported, want 1", rep.count())
			}
		})
	}
}

// A read the disk fails (not a damaged batch: an I/O error) fails the log
// like any other I/O failure; a damaged batch does not.
func TestFailedReadFailsTheLog(t *testing.T) {
	fsys := crashfs.New()
	rep := &failures{}
	l := openReporting(t, fsys, smallConfig(), rep)
	appendBatches(t, l, 1, 3, 2)
	failOnce(fsys, crashfs.OpRead, logFileSuffix, syscall.EIO)
	if _, err := l.Read(0, 1<<20, l.LogEndOffset()); !errors.Is(err, ErrStorage) {
		t.Fatalf("read on a failing disk: %v, want ErrStorage", err)
	}
	if rep.count() != 1 {
		t.Fatalf("%d failures reported, want 1", rep.count())
	}
	if _, err := l.AppendAsLeader(newBatch("after", 1), 1); !errors.Is(err, ErrStorage) {
		t.Fatalf("append after a failed read: %v, want ErrStorage", err)
	}
}

// followerBatches are n batches of records records each from offset 0 at
// epoch, as a leader sends them, concatenated.
func followerBatches(n, records int, epoch int32, tag string) []byte {
	var data []byte
	var next int64
	for i := range n {
		b := newBatch(fmt.Sprintf("%s-%d", tag, i), records)
		b.SetBaseOffset(next)
		b.SetLeaderEpoch(epoch)
		next = b.NextOffset()
		data = append(data, b...)
	}
	return data
}

// An append that fails for want of a descriptor (its index file could not
// be opened) leaves nothing of itself in the segment: the bytes it wrote
// would otherwise come back at the next recovery as records never
// appended, behind the records that took their offsets.
func TestAppendOutOfDescriptorsLeavesNothingBehind(t *testing.T) {
	fsys := crashfs.New()
	rep := &failures{}
	l := openReporting(t, fsys, smallConfig(), rep)
	// Twice: the file cache closes idle files and tries once more.
	failTimes(fsys, crashfs.OpOpen, indexFileSuffix, syscall.EMFILE, 2)
	if _, err := l.AppendAsFollower(followerBatches(3, 20, 1, "old")); !errors.Is(err, ErrFileLimit) {
		t.Fatalf("append without a descriptor for the index: %v, want ErrFileLimit", err)
	}
	fsys.SetFault(nil)
	if l.LogEndOffset() != 0 || l.LatestEpoch() != -1 {
		t.Fatalf("after the failed append: LEO %d, latest epoch %d; want 0 and none", l.LogEndOffset(), l.LatestEpoch())
	}
	if _, err := l.AppendAsFollower(followerBatches(1, 20, 2, "new")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	opts := testOptions("/p", smallConfig())
	opts.FS = fsys
	reopened := openAt(t, opts) // recovery point 0: every batch is read
	defer reopened.Close()
	if leo := reopened.LogEndOffset(); leo != 20 {
		t.Fatalf("log end %d after a restart, want 20: the failed append's batches came back", leo)
	}
	if rep.count() != 0 {
		t.Fatalf("%d failures reported for running out of descriptors", rep.count())
	}
}

// A truncation that cannot find where to cut because a batch before the
// cut point is damaged changes nothing and does not fail the log: damage
// is the partition's to handle, not a failing disk's.
func TestTruncationPastADamagedBatchDoesNotFailTheLog(t *testing.T) {
	fsys := crashfs.New()
	rep := &failures{}
	cfg := smallConfig()
	cfg.IndexIntervalBytes = 1 << 20 // no index entry: the cut point is found by reading headers
	l := openReporting(t, fsys, cfg, rep)
	batches := appendBatches(t, l, 1, 4, 1)
	f, err := fsys.OpenFile(segmentPath("/p", 0, logFileSuffix), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The second batch's length field claims 2 GiB.
	if _, err := f.WriteAt([]byte{0x7f, 0, 0, 0}, int64(len(batches[0]))+8); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	err = l.TruncateTo(3)
	if !errors.Is(err, record.ErrCorrupt) || errors.Is(err, ErrStorage) {
		t.Fatalf("truncation past a damaged batch: %v, want record.ErrCorrupt and no storage error", err)
	}
	if l.Failed() != nil || rep.count() != 0 || l.LogEndOffset() != 4 {
		t.Fatalf("failed %v, %d reports, LEO %d: want the log as it was", l.Failed(), rep.count(), l.LogEndOffset())
	}
}

// A follower append whose roll runs out of descriptors after a first run
// of batches went in keeps that prefix, and under FlushEveryBatch fsyncs it
// before the fetcher reports the new log end to the leader, which counts it
// toward the HW.
func TestFollowerAppendPrefixBeforeAFailedRollIsFlushed(t *testing.T) {
	fsys := crashfs.New()
	cfg := smallConfig()
	cfg.FlushPolicy = FlushEveryBatch
	l := openReporting(t, fsys, cfg, &failures{})
	data := followerBatches(12, 20, 1, "run")                         // more than one 2 KiB segment
	failTimes(fsys, crashfs.OpOpen, logFileSuffix, syscall.EMFILE, 2) // the roll's new segment, and the cache's retry
	if _, err := l.AppendAsFollower(data); !errors.Is(err, ErrFileLimit) {
		t.Fatalf("append whose roll had no descriptor: %v, want ErrFileLimit", err)
	}
	leo := l.LogEndOffset()
	if leo == 0 {
		t.Fatal("no prefix went in: the test needs the roll to come after a first run")
	}
	if rp := l.RecoveryPoint(); rp != leo {
		t.Fatalf("recovery point %d, log end %d: the prefix that went in is not fsynced", rp, leo)
	}
}

// Close of a failed log reports its failure: what was written since was
// never made durable, and an owner must not take the log for complete (a
// move's future log would be swapped in over the good one).
func TestCloseOfAFailedLogReportsTheFailure(t *testing.T) {
	fsys := crashfs.New()
	l := openReporting(t, fsys, smallConfig(), &failures{})
	appendBatches(t, l, 1, 2, 1)
	failOnce(fsys, crashfs.OpSync, logFileSuffix, syscall.EIO)
	if err := l.Flush(); !errors.Is(err, ErrStorage) {
		t.Fatalf("flush: %v", err)
	}
	if err := l.Close(); !errors.Is(err, ErrStorage) {
		t.Fatalf("close of a failed log: %v, want its failure", err)
	}
}
