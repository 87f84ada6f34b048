package log

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/epoch"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/vfs"
)

// TestNewLogLayout ensures a new log is one empty segment named by its start offset, its index created only with a first entry.
func TestNewLogLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	opts := testOptions(dir, DefaultConfig())
	opts.LogStartOffset = 42
	l := openAt(t, opts)
	defer closeLog(t, l)
	if l.LogEndOffset() != 42 || l.LogStartOffset() != 42 || l.HighWatermark() != 42 || l.RecoveryPoint() != 42 {
		t.Fatalf("offsets LEO %d LSO %d HW %d RP %d", l.LogEndOffset(), l.LogStartOffset(), l.HighWatermark(), l.RecoveryPoint())
	}
	if l.LatestEpoch() != epoch.Undefined || l.Dir() != dir || l.TopicPartition().Topic != "t" {
		t.Fatalf("latest epoch %d dir %s tp %v", l.LatestEpoch(), l.Dir(), l.TopicPartition())
	}
	if size := fileSize(t, filepath.Join(dir, "00000000000000000042.log")); size != 0 {
		t.Fatalf("new segment is %d bytes", size)
	}
	index := filepath.Join(dir, "00000000000000000042.index")
	if _, err := os.Stat(index); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index of an empty segment exists: %v", err)
	}
	appendBatches(t, l, 0, 2, 1) // below IndexIntervalBytes: no entry yet
	if _, err := os.Stat(index); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("index without entries exists: %v", err)
	}
	big := newBatch(strings.Repeat("x", 5000), 1) // crosses the 4096-byte interval
	for range 2 {
		if _, err := l.AppendAsLeader(bytes.Clone(big), 0); err != nil {
			t.Fatal(err)
		}
	}
	if size := fileSize(t, index); size != indexEntrySize {
		t.Fatalf("index is %d bytes, want one entry", size)
	}
}

// TestAppendReadAcrossRolls ensures appends roll segments at SegmentBytes and reads return every batch unchanged across them.
func TestAppendReadAcrossRolls(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l)
	written := appendBatches(t, l, 0, 60, 3)

	if l.LogEndOffset() != 180 {
		t.Fatalf("LEO %d, want 180", l.LogEndOffset())
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want several", len(segs))
	}
	var total int64
	bases := map[int64]bool{}
	for _, b := range written {
		bases[b.BaseOffset()] = true
	}
	for i, s := range segs {
		if !bases[s.BaseOffset] {
			t.Fatalf("segment %d base %d is not a batch base offset", i, s.BaseOffset)
		}
		if s.Size > smallConfig().SegmentBytes {
			t.Fatalf("segment %d is %d bytes, over SegmentBytes", i, s.Size)
		}
		total += s.Size
	}
	if total != l.Size() {
		t.Fatalf("Size %d, segments sum %d", l.Size(), total)
	}
	if names := segmentFiles(t, l.Dir()); len(names) != len(segs) || names[1] != filepath.Base(segmentPath("", segs[1].BaseOffset, ".log")) {
		t.Fatalf("files %v for segments %v", names, segs)
	}
	for _, s := range segs[:len(segs)-1] { // sealed segments have their index on disk
		if _, err := os.Stat(segmentPath(l.Dir(), s.BaseOffset, indexFileSuffix)); err != nil {
			t.Fatalf("sealed segment %d: %v", s.BaseOffset, err)
		}
	}
	requireSameBatches(t, readAll(t, l, 0, 1000), written)
	requireSameBatches(t, readAll(t, l, 0, 1), written) // at least one batch per read
}

// TestReadFromMiddle ensures a read from any offset, inside a batch or at a segment boundary, starts with the batch holding it.
func TestReadFromMiddle(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l)
	written := appendBatches(t, l, 0, 40, 3)
	for off := int64(0); off < l.LogEndOffset(); off++ {
		info, err := l.Read(off, 1, l.LogEndOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		got := splitBatches(t, info.Data)
		if want := written[off/3]; len(got) != 1 || got[0].BaseOffset() != want.BaseOffset() {
			t.Fatalf("Read(%d) gave %d batches, want the one at %d", off, len(got), want.BaseOffset())
		}
	}
}

// TestReadLimits ensures maxOffset excludes batches based at or past it and maxBytes cuts at whole batches, never to nothing.
func TestReadLimits(t *testing.T) {
	l := openTestLog(t, t.TempDir(), Config{SegmentBytes: 1 << 20, FlushPolicy: FlushOS})
	defer closeLog(t, l)
	written := appendBatches(t, l, 0, 10, 2) // batches at 0, 2, 4, ..., 18

	info, err := l.Read(0, 1<<20, 7)
	if err != nil {
		t.Fatal(err)
	}
	requireSameBatches(t, splitBatches(t, info.Data), written[:4]) // bases 0, 2, 4, 6
	info, err = l.Read(5, 1<<20, 4)
	if err != nil || len(info.Data) != 0 {
		t.Fatalf("batch based at maxOffset returned: %d bytes, %v", len(info.Data), err)
	}
	info, err = l.Read(5, 1<<20, 5)
	if err != nil {
		t.Fatal(err)
	}
	requireSameBatches(t, splitBatches(t, info.Data), written[2:3]) // base 4 < maxOffset 5

	size := len(written[0])
	info, err = l.Read(0, 3*size-1, 100)
	if err != nil {
		t.Fatal(err)
	}
	requireSameBatches(t, splitBatches(t, info.Data), written[:2])
	info, err = l.Read(0, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	requireSameBatches(t, splitBatches(t, info.Data), written[:1])
}

// TestReadOutOfRange ensures offsets below the log start or past the LEO are ErrOffsetOutOfRange and the LEO reads empty.
func TestReadOutOfRange(t *testing.T) {
	opts := testOptions(t.TempDir(), smallConfig())
	opts.LogStartOffset = 10
	l := openAt(t, opts)
	defer closeLog(t, l)
	appendBatches(t, l, 0, 2, 2)
	for _, off := range []int64{0, 9, 15, -1} {
		if _, err := l.Read(off, 100, 100); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read(%d) = %v, want ErrOffsetOutOfRange", off, err)
		}
	}
	info, err := l.Read(14, 100, 100)
	if err != nil || len(info.Data) != 0 {
		t.Fatalf("Read(LEO) = %d bytes, %v", len(info.Data), err)
	}
}

// TestReopenIdentical ensures a log closed and reopened has the same batches, offsets, segments and epochs.
func TestReopenIdentical(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallConfig())
	written := appendBatches(t, l, 1, 30, 3)
	written = append(written, appendBatches(t, l, 4, 30, 2)...)
	segs, epochs, leo := l.Segments(), l.EpochCache().Entries(), l.LogEndOffset()
	closeLog(t, l)
	if l.RecoveryPoint() != leo {
		t.Fatalf("recovery point %d after close, want LEO %d", l.RecoveryPoint(), leo)
	}

	opts := testOptions(dir, smallConfig())
	opts.RecoveryPoint = leo
	l = openAt(t, opts)
	defer closeLog(t, l)
	if l.LogEndOffset() != leo || !slices.Equal(l.Segments(), segs) || !slices.Equal(l.EpochCache().Entries(), epochs) {
		t.Fatalf("reopened LEO %d segments %v epochs %v; want %d %v %v", l.LogEndOffset(), l.Segments(), l.EpochCache().Entries(), leo, segs, epochs)
	}
	requireSameBatches(t, readAll(t, l, 0, 500), written)
	// Appends continue where the log ended.
	info, err := l.AppendAsLeader(newBatch("after", 1), 4)
	if err != nil || info.FirstOffset != leo {
		t.Fatalf("append after reopen at %d, %v; want %d", info.FirstOffset, err, leo)
	}
}

// TestLeaderEpochAssignment ensures a leader append stamps offset and epoch and records (epoch, LEO) only for a new epoch.
func TestLeaderEpochAssignment(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l)
	appendBatches(t, l, 2, 3, 2)
	b := newBatch("x", 1)
	info, err := l.AppendAsLeader(b, 5)
	if err != nil {
		t.Fatal(err)
	}
	if b.BaseOffset() != 6 || b.LeaderEpoch() != 5 || info != (AppendInfo{FirstOffset: 6, LastOffset: 6, Bytes: len(b)}) {
		t.Fatalf("stamped %d/%d, info %+v", b.BaseOffset(), b.LeaderEpoch(), info)
	}
	want := []checkpoint.EpochEntry{{Epoch: 2, StartOffset: 0}, {Epoch: 5, StartOffset: 6}}
	if got := l.EpochCache().Entries(); !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	if l.LatestEpoch() != 5 {
		t.Fatalf("latest epoch %d", l.LatestEpoch())
	}
	if err := l.MaybeAssignEpochStartOffset(7, l.LogEndOffset()); err != nil || l.LatestEpoch() != 7 {
		t.Fatalf("MaybeAssignEpochStartOffset: %v, latest %d", err, l.LatestEpoch())
	}
}

// TestFollowerAppend ensures a follower stores fetched batches byte for byte, learns their epochs and rejects a gap.
func TestFollowerAppend(t *testing.T) {
	leader := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, leader)
	written := appendBatches(t, leader, 1, 10, 2)
	written = append(written, appendBatches(t, leader, 3, 10, 2)...)

	follower := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, follower)
	for follower.LogEndOffset() < leader.LogEndOffset() {
		info, err := leader.Read(follower.LogEndOffset(), 700, leader.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendAsFollower(info.Data); err != nil {
			t.Fatalf("AppendAsFollower: %v", err)
		}
	}
	requireSameBatches(t, readAll(t, follower, 0, 1000), written)
	if got, want := follower.EpochCache().Entries(), leader.EpochCache().Entries(); !slices.Equal(got, want) {
		t.Fatalf("follower epochs %v, leader %v", got, want)
	}

	ahead := newBatch("ahead", 1)
	ahead.SetBaseOffset(follower.LogEndOffset() + 1)
	if _, err := follower.AppendAsFollower(ahead); !errors.Is(err, ErrOffsetMismatch) {
		t.Fatalf("append past LEO = %v, want ErrOffsetMismatch", err)
	}
	info, err := follower.AppendAsFollower(nil)
	if err != nil || info.FirstOffset != follower.LogEndOffset() || info.LastOffset != follower.LogEndOffset()-1 {
		t.Fatalf("empty append: %+v, %v", info, err)
	}
}

// TestFollowerAppendCorruptAppendsNothing ensures a fetch with one batch failing its CRC appends none of its batches.
func TestFollowerAppendCorruptAppendsNothing(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l)
	appendBatches(t, l, 1, 2, 2)
	leo, size, epochs := l.LogEndOffset(), l.Size(), l.EpochCache().Entries()

	good := newBatch("good", 2)
	good.SetBaseOffset(leo)
	good.SetLeaderEpoch(2)
	bad := newBatch("bad", 2)
	bad.SetBaseOffset(leo + 2)
	bad.SetLeaderEpoch(2)
	bad[len(bad)-1] ^= 1
	_, err := l.AppendAsFollower(append(append([]byte(nil), good...), bad...))
	if !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("AppendAsFollower = %v, want record.ErrCorrupt", err)
	}
	if l.LogEndOffset() != leo || l.Size() != size || !slices.Equal(l.EpochCache().Entries(), epochs) {
		t.Fatalf("corrupt fetch changed the log: LEO %d size %d epochs %v", l.LogEndOffset(), l.Size(), l.EpochCache().Entries())
	}
	if _, err := l.AppendAsFollower(good[:len(good)-3]); !errors.Is(err, record.ErrTruncated) {
		t.Fatalf("partial batch = %v, want record.ErrTruncated", err)
	}
}

// TestBatchTooLarge ensures both append paths refuse a batch over MaxBatchBytes with ErrBatchTooLarge.
func TestBatchTooLarge(t *testing.T) {
	cfg := smallConfig()
	cfg.MaxBatchBytes = 200
	l := openTestLog(t, t.TempDir(), cfg)
	defer closeLog(t, l)
	big := newBatch("big", 20)
	if _, err := l.AppendAsLeader(big, 0); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("leader: %v", err)
	}
	if _, err := l.AppendAsFollower(big); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("follower: %v", err)
	}
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("refused batch appended")
	}
}

// TestLeaderAppendRejectsCorrupt ensures the leader does not store a batch that fails its CRC.
func TestLeaderAppendRejectsCorrupt(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l)
	b := newBatch("x", 2)
	b[len(b)-1] ^= 0x40
	if _, err := l.AppendAsLeader(b, 0); !errors.Is(err, record.ErrCorrupt) {
		t.Fatalf("AppendAsLeader = %v, want record.ErrCorrupt", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("LEO %d", l.LogEndOffset())
	}
}

// TestHighWatermarkClamped ensures UpdateHighWatermark keeps the HW within [LogStartOffset, LEO].
func TestHighWatermarkClamped(t *testing.T) {
	opts := testOptions(t.TempDir(), smallConfig())
	opts.LogStartOffset = 5
	l := openAt(t, opts)
	defer closeLog(t, l)
	appendBatches(t, l, 0, 3, 2) // LEO 11
	for _, c := range []struct{ in, want int64 }{{8, 8}, {100, 11}, {0, 5}, {11, 11}} {
		if got := l.UpdateHighWatermark(c.in); got != c.want || l.HighWatermark() != c.want {
			t.Fatalf("UpdateHighWatermark(%d) = %d (HW %d), want %d", c.in, got, l.HighWatermark(), c.want)
		}
	}
}

// TestFlushMovesRecoveryPoint ensures non-FlushEveryBatch appends leave the recovery point and Flush moves it to the LEO.
func TestFlushMovesRecoveryPoint(t *testing.T) {
	for _, policy := range []FlushPolicy{FlushInterval, FlushOS} {
		cfg := smallConfig()
		cfg.FlushPolicy = policy
		l := openTestLog(t, t.TempDir(), cfg)
		appendBatches(t, l, 0, 30, 2)
		if l.RecoveryPoint() != 0 {
			t.Fatalf("policy %d: recovery point %d before Flush", policy, l.RecoveryPoint())
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if l.RecoveryPoint() != l.LogEndOffset() {
			t.Fatalf("policy %d: recovery point %d after Flush, LEO %d", policy, l.RecoveryPoint(), l.LogEndOffset())
		}
		closeLog(t, l)
	}
}

// TestStorageErrorWrapped ensures an IO failure surfaces as ErrStorage and moves nothing.
func TestStorageErrorWrapped(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer l.Close()
	_ = l.activeSegment().file.Close() // the disk goes away under the log
	if _, err := l.AppendAsLeader(newBatch("x", 1), 0); !errors.Is(err, ErrStorage) {
		t.Fatalf("append = %v, want ErrStorage", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("failed append moved the LEO to %d", l.LogEndOffset())
	}
}

// TestClosedAndDeleted ensures a closed log refuses work with ErrClosed and Delete removes the partition directory.
func TestClosedAndDeleted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	l := openTestLog(t, dir, smallConfig())
	appendBatches(t, l, 0, 2, 1)
	closeLog(t, l)
	if _, err := l.AppendAsLeader(newBatch("x", 1), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close = %v", err)
	}
	if _, err := l.Read(0, 100, 100); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}

	l = openTestLog(t, dir, smallConfig())
	if err := l.Delete(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dir still there after Delete: %v", err)
	}
}

// TestInvalidConfig ensures impossible settings are refused before any file is made.
func TestInvalidConfig(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "t-0")
	for _, cfg := range []Config{{SegmentBytes: 1 << 32}, {IndexIntervalBytes: -1}, {MaxBatchBytes: -1}, {FlushPolicy: 7}} {
		if _, err := Open(testOptions(dir, cfg)); err == nil {
			t.Fatalf("config %+v accepted", cfg)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused config created the dir")
	}
}

// Ensures an epoch assigned by makeLeader (in memory) is in the
// leader-epoch-checkpoint once the epoch's first batch is appended and
// flushed (DefaultConfig flushes every batch; see
// TestNewEpochEntryWrittenByTheFlush for the other policies).
func TestAssignedEpochPersistedBeforeFirstAppend(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(Options{Dir: dir, Config: DefaultConfig(), SyncMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.MaybeAssignEpochStartOffset(7, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(record.Build([]record.Record{{Value: []byte("a")}}, 1), 7); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.ReadEpochs(vfs.OS, filepath.Join(dir, EpochCheckpointFile))
	if err != nil || len(got) != 1 || got[0] != (checkpoint.EpochEntry{Epoch: 7, StartOffset: 0}) {
		t.Fatalf("leader-epoch-checkpoint %v %v, want [{7 0}]", got, err)
	}
}

// A new epoch's entry is recorded in memory by the append that starts it,
// with no file write (no fsync under the log lock), and written durably by
// the flush that moves the recovery point past its first batch: with
// FlushEveryBatch the append's own flush, with FlushOS the next Flush or
// Close.
func TestNewEpochEntryWrittenByTheFlush(t *testing.T) {
	epochFile := func(dir string) []checkpoint.EpochEntry {
		t.Helper()
		got, err := checkpoint.ReadEpochs(vfs.OS, filepath.Join(dir, EpochCheckpointFile))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for name, policy := range map[string]FlushPolicy{"os": FlushOS, "every-batch": FlushEveryBatch} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := smallConfig()
			cfg.FlushPolicy = policy
			l := openTestLog(t, dir, cfg)
			defer closeLog(t, l)
			appendBatches(t, l, 5, 1, 2)
			if l.LatestEpoch() != 5 {
				t.Fatalf("latest epoch %d after the append, want 5", l.LatestEpoch())
			}
			if policy == FlushEveryBatch {
				if got := epochFile(dir); len(got) != 1 || got[0] != (checkpoint.EpochEntry{Epoch: 5, StartOffset: 0}) || l.RecoveryPoint() != l.LogEndOffset() {
					t.Fatalf("after an every-batch append: file %v, recovery point %d of %d; want [5 0] and all durable", got, l.RecoveryPoint(), l.LogEndOffset())
				}
				return
			}
			if got := epochFile(dir); len(got) != 0 || l.RecoveryPoint() != 0 {
				t.Fatalf("FlushOS append: file %v, recovery point %d; want nothing written yet", got, l.RecoveryPoint())
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if got := epochFile(dir); len(got) != 1 || got[0].Epoch != 5 || l.RecoveryPoint() != l.LogEndOffset() {
				t.Fatalf("after Flush: file %v, recovery point %d of %d; want [5 0] and all durable", got, l.RecoveryPoint(), l.LogEndOffset())
			}
			appendBatches(t, l, 6, 1, 2)
			closeLog(t, l)
			if got := epochFile(dir); len(got) != 2 || got[1] != (checkpoint.EpochEntry{Epoch: 6, StartOffset: 2}) {
				t.Fatalf("after Close: file %v, want epochs 5 and 6 (at 2)", got)
			}
		})
	}
}

// A crash before the flush loses the in-memory entry, not the epoch: the
// batches above the recovery point are recovered at open, and their epochs
// assigned again from them. The follower's path records epochs the same way.
func TestUnflushedEpochRecoveredFromBatches(t *testing.T) {
	leader := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, leader)
	var data []byte
	for _, b := range appendBatches(t, leader, 7, 2, 2) {
		data = append(data, b...)
	}
	dir := t.TempDir()
	f := openTestLog(t, dir, smallConfig()) // FlushOS
	defer closeLog(t, f)
	if _, err := f.AppendAsFollower(data); err != nil {
		t.Fatal(err)
	}
	if got, _ := checkpoint.ReadEpochs(vfs.OS, filepath.Join(dir, EpochCheckpointFile)); len(got) != 0 || f.LatestEpoch() != 7 {
		t.Fatalf("follower: file %v, latest epoch %d; want nothing written, 7 in memory", got, f.LatestEpoch())
	}
	// The process dies: no Close, no flush. (The page cache keeps the
	// segment bytes, as it would for a killed process.)
	crashed := openTestLog(t, dir, smallConfig())
	defer closeLog(t, crashed)
	if crashed.LatestEpoch() != 7 || crashed.LogEndOffset() != 4 {
		t.Fatalf("after the crash: latest epoch %d, LEO %d; want 7 and 4", crashed.LatestEpoch(), crashed.LogEndOffset())
	}
	if got := crashed.EpochCache().Entries(); len(got) != 1 || got[0] != (checkpoint.EpochEntry{Epoch: 7, StartOffset: 0}) {
		t.Fatalf("epoch entries after the crash: %v, want [7 0]", got)
	}
}

// After a truncation lowered the recovery point, the owner's checkpoint may
// still hold the old one, and a restart trusts the records below it without
// reading their epochs. A new epoch starting below it is therefore written
// at once, not at the next flush.
func TestNewEpochBelowAStaleRecoveryPointWrittenAtOnce(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallConfig()) // FlushOS
	appendBatches(t, l, 5, 4, 10)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	stale := l.RecoveryPoint() // what the owner checkpointed: 40
	if err := l.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	// The new leader's records from 10 on: several segments, so those
	// below the stale recovery point are not the last one (which open
	// reads).
	appendBatches(t, l, 7, 30, 10)
	if n := len(l.segmentList()); n < 3 {
		t.Fatalf("%d segments, want several", n)
	}
	// The process dies before the owner writes the lowered recovery point.
	opts := testOptions(dir, smallConfig())
	opts.RecoveryPoint = stale
	crashed := openAt(t, opts)
	defer closeLog(t, crashed)
	want := []checkpoint.EpochEntry{{Epoch: 5, StartOffset: 0}, {Epoch: 7, StartOffset: 10}}
	if got := crashed.EpochCache().Entries(); !slices.Equal(got, want) {
		t.Fatalf("epochs after the crash: %v, want %v", got, want)
	}
	l.Close()

	// Once the recovery point is back above the old one, new epochs wait
	// for the flush again.
	l2 := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l2)
	appendBatches(t, l2, 5, 4, 10)
	if err := l2.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := l2.TruncateTo(10); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l2, 7, 4, 10) // to 50
	if err := l2.Flush(); err != nil {
		t.Fatal(err)
	}
	appendBatches(t, l2, 8, 1, 10)
	if got, _ := checkpoint.ReadEpochs(vfs.OS, filepath.Join(l2.Dir(), EpochCheckpointFile)); len(got) != 2 || got[1].Epoch != 7 {
		t.Fatalf("epoch file: %v, want epoch 8 not yet written (in memory until the flush)", got)
	}
}

// A restart from a recovery point above zero: the epochs flushed before it
// come from the file, one started after the flush from its batches.
func TestUnflushedEpochRecoveredAboveTheRecoveryPoint(t *testing.T) {
	for name, policy := range map[string]FlushPolicy{"os": FlushOS, "interval": FlushInterval} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := smallConfig()
			cfg.FlushPolicy = policy
			l := openTestLog(t, dir, cfg)
			defer l.Close()
			appendBatches(t, l, 3, 2, 5)
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			rp := l.RecoveryPoint()
			appendBatches(t, l, 4, 2, 5)
			opts := testOptions(dir, cfg)
			opts.RecoveryPoint = rp
			crashed := openAt(t, opts)
			defer closeLog(t, crashed)
			want := []checkpoint.EpochEntry{{Epoch: 3, StartOffset: 0}, {Epoch: 4, StartOffset: rp}}
			if got := crashed.EpochCache().Entries(); !slices.Equal(got, want) {
				t.Fatalf("epochs after the crash: %v, want %v", got, want)
			}
		})
	}
}

// A leader-epoch-checkpoint that does not parse is set aside and rebuilt
// from the batches (every batch carries its epoch), instead of failing the
// open and with it the whole log dir.
func TestMalformedEpochCheckpointRebuiltFromBatches(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallConfig())
	appendBatches(t, l, 2, 3, 4)
	appendBatches(t, l, 5, 3, 4)
	want := l.EpochCache().Entries()
	rp := l.LogEndOffset()
	closeLog(t, l)
	path := filepath.Join(dir, EpochCheckpointFile)
	if err := os.WriteFile(path, []byte("0\n2\n2 0\ngarbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(dir, smallConfig())
	opts.RecoveryPoint = rp // a clean shutdown's: nothing would be re-read
	reopened := openAt(t, opts)
	defer closeLog(t, reopened)
	if got := reopened.EpochCache().Entries(); !slices.Equal(got, want) || len(want) != 2 {
		t.Fatalf("epochs after the rebuild: %v, want %v", got, want)
	}
	if got, err := checkpoint.ReadEpochs(vfs.OS, path); err != nil || !slices.Equal(got, want) {
		t.Fatalf("rewritten file: %v %v, want %v", got, err, want)
	}
	if b, err := os.ReadFile(path + ".corrupt"); err != nil || !strings.Contains(string(b), "garbage") {
		t.Fatalf("the bad file was not kept: %q %v", b, err)
	}
	if reopened.LogEndOffset() != rp {
		t.Fatalf("LEO %d after the rebuild, want %d", reopened.LogEndOffset(), rp)
	}
}
