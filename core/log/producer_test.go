package log

import (
	"errors"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/replicad/replicad/core/log/producerstate"
	"github.com/replicad/replicad/core/record"
)

// pbatch builds producer id's batch of n records from sequence seq at epoch,
// timestamped ts.
func pbatch(id int64, epoch int16, seq int32, n int, ts int64) record.Batch {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{TimestampMs: ts, Value: []byte(fmt.Sprintf("p%d-e%d-s%d", id, epoch, int64(seq)+int64(i)))}
	}
	return record.BuildProducer(recs, ts, record.Producer{ID: id, Epoch: epoch, BaseSequence: seq})
}

func mustAppend(t *testing.T, l *Log, b record.Batch, leaderEpoch int32) AppendInfo {
	t.Helper()
	info, err := l.AppendAsLeader(b, leaderEpoch)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

// replayedState is the producer state the log's batches say, built by
// applying every batch from the log start: the oracle a log's own state
// (incremental, snapshot-loaded, rebuilt) must equal.
func replayedState(t *testing.T, l *Log) *producerstate.Manager {
	t.Helper()
	m := producerstate.NewManager(0)
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		info, err := l.Read(off, math.MaxInt32, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Data) == 0 {
			t.Fatalf("nothing at %d below %d", off, l.LogEndOffset())
		}
		for _, b := range splitBatches(t, info.Data) {
			if b.HasProducer() {
				m.ApplyBatch(b)
			}
			off = b.NextOffset()
		}
	}
	return m
}

func checkState(t *testing.T, what string, l *Log) {
	t.Helper()
	if got, want := l.ProducerState(), replayedState(t, l); !got.Equal(want) {
		t.Fatalf("%s: producer state %v, the log says %v", what, got.Describe(0), want.Describe(0))
	}
}

// TestProducerSequenceRules checks every rule of a leader's append of a v1 batch.
func TestProducerSequenceRules(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l)

	// Unknown producer: only sequence 0 starts it.
	if _, err := l.AppendAsLeader(pbatch(7, 0, 3, 1, 10), 1); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("unknown producer at sequence 3: %v, want ErrUnknownProducerID", err)
	}
	first := mustAppend(t, l, pbatch(7, 0, 0, 2, 10), 1) // seqs 0-1
	if first.Duplicate || first.FirstOffset != 0 || first.LastOffset != 1 {
		t.Fatalf("first batch: %+v", first)
	}
	// The next sequence appends; a gap does not.
	mustAppend(t, l, pbatch(7, 0, 2, 3, 11), 1) // 2-4
	leo := l.LogEndOffset()
	if _, err := l.AppendAsLeader(pbatch(7, 0, 6, 1, 12), 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v, want ErrOutOfOrderSequence", err)
	}
	// A retry of one of the last five: its original offsets, nothing appended.
	dup := mustAppend(t, l, pbatch(7, 0, 0, 2, 10), 1)
	if !dup.Duplicate || dup.FirstOffset != first.FirstOffset || dup.LastOffset != first.LastOffset || l.LogEndOffset() != leo {
		t.Fatalf("retry of the first batch: %+v, log end %d (was %d)", dup, l.LogEndOffset(), leo)
	}
	// Same first sequence, another last sequence: not the same batch.
	if _, err := l.AppendAsLeader(pbatch(7, 0, 0, 1, 10), 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("partial retry: %v, want ErrOutOfOrderSequence", err)
	}
	// Five more batches push the first out of the window: its retry is out of order.
	for i := range 5 {
		mustAppend(t, l, pbatch(7, 0, int32(5+i), 1, 12), 1)
	}
	if _, err := l.AppendAsLeader(pbatch(7, 0, 0, 2, 10), 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("retry older than the last five: %v, want ErrOutOfOrderSequence", err)
	}
	if d := mustAppend(t, l, pbatch(7, 0, 5, 1, 12), 1); !d.Duplicate {
		t.Fatalf("retry of the oldest of the last five: %+v, want duplicate", d)
	}
	// A newer epoch must start at 0, then fences the older one.
	if _, err := l.AppendAsLeader(pbatch(7, 1, 10, 1, 13), 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("new epoch at sequence 10: %v, want ErrOutOfOrderSequence", err)
	}
	if info := mustAppend(t, l, pbatch(7, 1, 0, 1, 13), 1); !info.Fenced || info.FencedEpoch != 0 {
		t.Fatalf("new epoch at 0: %+v, want fenced epoch 0", info)
	}
	if _, err := l.AppendAsLeader(pbatch(7, 0, 10, 1, 13), 1); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("old epoch after the fence: %v, want ErrInvalidProducerEpoch", err)
	}
	// The old epoch's batches are no longer duplicates in the new one.
	if _, err := l.AppendAsLeader(pbatch(7, 1, 5, 1, 12), 1); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("old epoch's sequence in the new epoch: %v", err)
	}
	// Sequences wrap past MaxInt32 to 0.
	mustAppend(t, l, pbatch(8, 0, 0, 1, 14), 1)
	l.mu.Lock()
	e := l.producers.Get(8)
	e.Epoch = 0
	l.producers.Apply(8, 0, producerstate.Batch{FirstSeq: math.MaxInt32 - 1, LastSeq: math.MaxInt32 - 1, FirstOffset: l.LogEndOffset() - 1, LastOffset: l.LogEndOffset() - 1, MaxTimestamp: 14})
	l.mu.Unlock()
	if _, err := l.AppendAsLeader(pbatch(8, 0, math.MaxInt32, 2, 14), 1); err != nil { // MaxInt32, then 0
		t.Fatalf("batch across the wrap: %v", err)
	}
	if _, err := l.AppendAsLeader(pbatch(8, 0, 1, 1, 14), 1); err != nil {
		t.Fatalf("batch after the wrap: %v", err)
	}
	if n, ps := l.Producers(0); n != 2 || ps[0].ID != 8 || ps[0].LastSequence != 1 || ps[1].ID != 7 || ps[1].Epoch != 1 {
		t.Fatalf("producers %d %+v", n, ps)
	}
	if l.ProducerCount() != 2 {
		t.Fatalf("producer count %d", l.ProducerCount())
	}
}

// TestMixedLogAndFollowerState: a log of v0 batches, then v1 ones, and a
// follower's state built from the leader's batches equals the leader's.
func TestMixedLogAndFollowerState(t *testing.T) {
	leader := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, leader)
	appendAsLeader(t, leader, 3, "plain", 2, 1)
	for i := range 20 {
		id := int64(1 + i%4)
		seq := int32(i / 4 * 2)
		mustAppend(t, leader, pbatch(id, 0, seq, 2, int64(100+i)), 1)
		if i%5 == 0 {
			appendAsLeader(t, leader, 1, "plain", 1, 1)
		}
	}
	checkState(t, "leader", leader)
	if leader.ProducerCount() != 4 {
		t.Fatalf("%d producers, want 4", leader.ProducerCount())
	}
	follower := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, follower)
	for off := int64(0); off < leader.LogEndOffset(); {
		info, err := leader.Read(off, 700, math.MaxInt64)
		if err != nil {
			t.Fatal(err)
		}
		a, err := follower.AppendAsFollower(info.Data)
		if err != nil {
			t.Fatal(err)
		}
		off = a.LastOffset + 1
	}
	if !follower.ProducerState().Equal(leader.ProducerState()) {
		t.Fatalf("follower %v, leader %v", follower.ProducerState().Describe(0), leader.ProducerState().Describe(0))
	}
	// A plain batch after them all still appends as before.
	appendAsLeader(t, leader, 1, "plain", 1, 1)
}

// TestTruncationRollsProducerStateBack: a batch cut by a truncation is no
// duplicate any more: its retry appends again; a producer whose batches are
// all cut is unknown.
func TestTruncationRollsProducerStateBack(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 400 // several rolls, so snapshots above and below the cut
	l := openTestLog(t, t.TempDir(), cfg)
	defer closeLog(t, l)
	for i := range 12 {
		mustAppend(t, l, pbatch(1, 0, int32(i*2), 2, 100), 1)
	}
	cut := l.LogEndOffset()
	mustAppend(t, l, pbatch(2, 0, 0, 2, 100), 1)
	last := mustAppend(t, l, pbatch(1, 0, 24, 2, 100), 1)
	waitSnapshots(t, l)
	if err := l.TruncateTo(last.FirstOffset); err != nil {
		t.Fatal(err)
	}
	checkState(t, "after truncating the last batch", l)
	again := mustAppend(t, l, pbatch(1, 0, 24, 2, 100), 1)
	if again.Duplicate || again.FirstOffset != last.FirstOffset {
		t.Fatalf("retry of the truncated batch: %+v, want a new append at %d", again, last.FirstOffset)
	}
	// Cut producer 2's only batch: it is unknown again.
	if err := l.TruncateTo(cut); err != nil {
		t.Fatal(err)
	}
	checkState(t, "after truncating producer 2 away", l)
	if _, err := l.AppendAsLeader(pbatch(2, 0, 2, 1, 100), 1); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("producer 2 after its batches were cut: %v", err)
	}
	if err := l.TruncateTo(5); err != nil { // below most snapshots
		t.Fatal(err)
	}
	checkState(t, "after truncating below the snapshots", l)
	for _, s := range snapshotOffsets(t, l) {
		if s > l.LogEndOffset() {
			t.Fatalf("snapshot %d above the log end %d kept", s, l.LogEndOffset())
		}
	}
	if err := l.TruncateFullyAndStartAt(100); err != nil {
		t.Fatal(err)
	}
	if l.ProducerCount() != 0 || len(snapshotOffsets(t, l)) != 0 {
		t.Fatalf("after a full truncation: %d producers, snapshots %v", l.ProducerCount(), snapshotOffsets(t, l))
	}
	if _, err := l.AppendAsLeader(pbatch(1, 0, 26, 1, 100), 1); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("producer 1 after a full truncation: %v", err)
	}
}

// snapshotEveryClose makes Close write a snapshot whatever it saves.
func snapshotEveryClose(t *testing.T) {
	old := closeSnapshotMinBytes
	closeSnapshotMinBytes = 0
	t.Cleanup(func() { closeSnapshotMinBytes = old })
}

// TestCloseSnapshotOnlyWhenWorthIt: Close writes no snapshot for a log with
// little past its newest one (a broker closing thousands of idle logs),
// and one for a log with more.
func TestCloseSnapshotOnlyWhenWorthIt(t *testing.T) {
	old := closeSnapshotMinBytes
	closeSnapshotMinBytes = 2000
	t.Cleanup(func() { closeSnapshotMinBytes = old })
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20
	dir := t.TempDir()
	l := openTestLog(t, dir, cfg)
	mustAppend(t, l, pbatch(1, 0, 0, 2, 100), 1)
	closeLog(t, l)
	if offs := snapshotOffsets(t, l); len(offs) != 0 {
		t.Fatalf("snapshots %v after closing a log of one batch", offs)
	}
	l = openTestLog(t, dir, cfg)
	for i := range 40 {
		mustAppend(t, l, pbatch(1, 0, int32(2+2*i), 2, 100), 1)
	}
	want := l.ProducerState()
	closeLog(t, l)
	if offs := snapshotOffsets(t, l); len(offs) != 1 || offs[0] != 82 {
		t.Fatalf("snapshots %v, want one at the log end 82", offs)
	}
	l = openTestLog(t, dir, cfg)
	defer closeLog(t, l)
	if !l.ProducerState().Equal(want) {
		t.Fatal("state differs after a restart from the close's snapshot")
	}
}

// waitSnapshots waits for the background sealer's snapshots: it runs under
// syncMu.
func waitSnapshots(t *testing.T, l *Log) {
	t.Helper()
	l.syncMu.Lock()
	l.syncMu.Unlock() //nolint:staticcheck // the wait is the point
	// Several sealers may be queued: a flush queues behind them all.
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

func snapshotOffsets(t *testing.T, l *Log) []int64 {
	t.Helper()
	offs, _, err := producerstate.Snapshots(l.fsys, l.dir)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

// TestProducerStateSurvivesRestart: reopened after a clean close (from the
// close's snapshot), without any snapshot (from the log), and with a
// damaged or stale one, the state is the same.
func TestProducerStateSurvivesRestart(t *testing.T) {
	snapshotEveryClose(t)
	cfg := smallConfig()
	cfg.SegmentBytes = 500
	dir := t.TempDir()
	l := openTestLog(t, dir, cfg)
	for i := range 30 {
		mustAppend(t, l, pbatch(int64(1+i%3), 0, int32(i/3), 1, int64(100+i)), 1)
	}
	want := l.ProducerState()
	closeLog(t, l)
	offs := snapshotOffsets(t, l)
	if len(offs) == 0 || offs[len(offs)-1] != 30 || len(offs) > snapshotsKept {
		t.Fatalf("snapshots %v: want the close's at 30, at most %d", offs, snapshotsKept)
	}
	reopen := func(what string) *Log {
		t.Helper()
		r := openTestLog(t, dir, cfg)
		if got := r.ProducerState(); !got.Equal(want) {
			t.Fatalf("%s: state %v, want %v", what, got.Describe(0), want.Describe(0))
		}
		return r
	}
	closeLog(t, reopen("from the close's snapshot"))

	// Damaged: the newest snapshot's bytes flipped; it is deleted and the
	// state rebuilt from an older one and the log.
	path := producerstate.SnapshotPath(dir, 30)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 0xff
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := openTestLog(t, dir, cfg)
	if got := r.ProducerState(); !got.Equal(want) {
		t.Fatalf("damaged snapshot: state %v, want %v", got.Describe(0), want.Describe(0))
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the damaged snapshot is still there")
	}
	// Stale: a snapshot above the log end (its batches lost) is ignored and deleted.
	r.mu.Lock()
	stale := r.producers.Clone()
	r.mu.Unlock()
	stale.Apply(9, 0, producerstate.Batch{FirstSeq: 0, LastSeq: 0, FirstOffset: 40, LastOffset: 40, MaxTimestamp: 1})
	if err := producerstate.WriteSnapshot(r.fsys, dir, 41, stale.Encode(41)); err != nil {
		t.Fatal(err)
	}
	if err := r.shutdown(false); err != nil { // a crash: no close snapshot
		t.Fatal(err)
	}
	r = reopen("with a stale snapshot above the log end")
	if _, err := os.Stat(producerstate.SnapshotPath(dir, 41)); err == nil {
		t.Fatal("the stale snapshot is still there")
	}
	closeLog(t, r)

	// None at all: rebuilt from the log start.
	for _, off := range snapshotOffsets(t, r) {
		if err := os.Remove(producerstate.SnapshotPath(dir, off)); err != nil {
			t.Fatal(err)
		}
	}
	closeLog(t, reopen("without a snapshot"))
}

// TestLogStartDropsProducers: a producer whose batches are all below the
// new log start goes; one with a batch above it stays.
func TestLogStartDropsProducers(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 300
	l := openTestLog(t, t.TempDir(), cfg)
	defer closeLog(t, l)
	mustAppend(t, l, pbatch(1, 0, 0, 2, 100), 1)
	mustAppend(t, l, pbatch(2, 0, 0, 2, 100), 1)
	start := l.LogEndOffset()
	for i := range 6 {
		mustAppend(t, l, pbatch(2, 0, int32(2+i), 1, 100), 1)
	}
	l.UpdateHighWatermark(l.LogEndOffset())
	if _, err := l.IncrementLogStartOffset(start); err != nil {
		t.Fatal(err)
	}
	if l.ProducerCount() != 1 || l.ProducerState().Get(2) == nil {
		t.Fatalf("after the log start moved past producer 1: %v", l.ProducerState().Describe(0))
	}
	checkState(t, "after the log start moved", l)
	// Into producer 2's batches: those below it are forgotten, as a replay
	// from the log start (a restart without snapshot) would.
	if _, err := l.IncrementLogStartOffset(start + 3); err != nil {
		t.Fatal(err)
	}
	checkState(t, "after the log start moved into producer 2's batches", l)
	if n := len(l.ProducerState().Get(2).Batches()); n != 3 {
		t.Fatalf("producer 2 keeps %d batches, want the 3 at or above the log start", n)
	}
	if _, err := l.AppendAsLeader(pbatch(1, 0, 2, 1, 100), 1); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("producer 1 after its batches were deleted: %v", err)
	}
	for _, s := range snapshotOffsets(t, l) {
		if s < start {
			t.Fatalf("snapshot %d below the log start %d kept", s, start)
		}
	}
}

// TestProducerExpiryAndBound: a producer idle past the expiration goes;
// past MaxProducers the ones whose last batch is oldest go.
func TestProducerExpiryAndBound(t *testing.T) {
	cfg := smallConfig()
	cfg.ProducerIDExpirationMs = 1000
	cfg.MaxProducers = 10
	l := openTestLog(t, t.TempDir(), cfg)
	defer closeLog(t, l)
	mustAppend(t, l, pbatch(1, 0, 0, 1, 5000), 1)
	mustAppend(t, l, pbatch(2, 0, 0, 1, 5500), 1)
	if gone := l.RemoveExpiredProducers(5999); len(gone) != 0 {
		t.Fatalf("expired %v at 5999", gone)
	}
	if gone := l.RemoveExpiredProducers(6000); len(gone) != 1 || gone[0] != 1 {
		t.Fatalf("expired %v at 6000, want [1]", gone)
	}
	if _, err := l.AppendAsLeader(pbatch(1, 0, 1, 1, 6000), 1); !errors.Is(err, ErrUnknownProducerID) {
		t.Fatalf("expired producer: %v", err)
	}
	for id := int64(10); id < 20; id++ {
		mustAppend(t, l, pbatch(id, 0, 0, 1, 6000), 1)
	}
	// 11 held: the bound evicts down to 9, producer 2 (the oldest) first.
	if n := l.ProducerCount(); n != 9 {
		t.Fatalf("%d producers, want 9 after eviction", n)
	}
	st := l.ProducerState()
	if st.Get(2) != nil || st.Get(10) != nil || st.Get(19) == nil {
		t.Fatalf("evicted the wrong producers: %v", st.Describe(0))
	}
}

// TestRebuildReadsSmallPlainBatches: a rebuild reads each batch's header
// only as far as it goes: a plain batch can be shorter than a v1 header
// (crashtest every-batch seed 29: the rebuild read past a small batch
// into the next and failed the log dir).
func TestRebuildReadsSmallPlainBatches(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l)
	tiny := func() record.Batch { return record.Build([]record.Record{{Value: []byte("x")}}, 1) }
	if len(tiny()) >= record.HeaderSize+record.ProducerFieldsSize {
		t.Fatalf("a %d-byte batch is not smaller than a v1 header", len(tiny()))
	}
	for i := range 4 {
		mustAppend(t, l, tiny(), 1)
		mustAppend(t, l, pbatch(1, 0, int32(i), 1, 100), 1)
	}
	mustAppend(t, l, tiny(), 1)
	if err := l.TruncateTo(l.LogEndOffset() - 1); err != nil {
		t.Fatal(err)
	}
	checkState(t, "after a rebuild over small plain batches", l)
	if l.ProducerCount() != 1 {
		t.Fatalf("%d producers", l.ProducerCount())
	}
}

// TestConcurrentProducersWithRollsAndSnapshots: producers appending at
// once, each its own sequence, while rolls write snapshots in the
// background and readers describe and expire: every batch is appended
// once, and the state (live and reopened) is what the log says.
func TestConcurrentProducersWithRollsAndSnapshots(t *testing.T) {
	cfg := smallConfig()
	cfg.SegmentBytes = 600
	dir := t.TempDir()
	l := openTestLog(t, dir, cfg)
	const producers, batches = 4, 40
	errs := make(chan error, producers+1)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				errs <- nil
				return
			default:
				l.Producers(2)
				l.RemoveExpiredProducers(0) // nothing is that old
			}
		}
	}()
	for id := int64(1); id <= producers; id++ {
		go func() {
			for i := range batches {
				b := pbatch(id, 0, int32(i), 1, 100)
				info, err := l.AppendAsLeader(b, 1)
				if err == nil && info.Duplicate {
					err = fmt.Errorf("producer %d batch %d: duplicate", id, i)
				}
				if err == nil && i%7 == 0 { // a retry of the batch just appended
					var d AppendInfo
					if d, err = l.AppendAsLeader(pbatch(id, 0, int32(i), 1, 100), 1); err == nil && (!d.Duplicate || d.FirstOffset != info.FirstOffset) {
						err = fmt.Errorf("producer %d retry of %d: %+v, want the duplicate of %d", id, i, d, info.FirstOffset)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range producers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-errs
	if l.LogEndOffset() != producers*batches {
		t.Fatalf("log end %d, want %d", l.LogEndOffset(), producers*batches)
	}
	checkState(t, "live", l)
	want := l.ProducerState()
	waitSnapshots(t, l)
	if err := l.shutdown(false); err != nil { // no close snapshot: from a roll's
		t.Fatal(err)
	}
	r := openTestLog(t, dir, cfg)
	defer closeLog(t, r)
	if !r.ProducerState().Equal(want) {
		t.Fatalf("reopened: %v, want %v", r.ProducerState().Describe(0), want.Describe(0))
	}
}
