package core

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// retentionHarness is a broker whose periodic check runs every
// interval, with segments of about ten records.
func retentionHarness(t *testing.T, r log.Retention, interval time.Duration, mutate ...func(*Config)) *harness {
	return newHarness(t, 1, append([]func(*Config){func(c *Config) {
		c.Retention = &r
		c.RetentionCheckInterval = interval
		c.LogConfig = log.Config{SegmentBytes: 1024, IndexIntervalBytes: 256, MaxBatchBytes: 1024, FlushPolicy: log.FlushOS}
		c.ReplicaLagTimeMax = 24 * time.Hour // no ISR shrink check meddling
	}}, mutate...)...)
}

// The periodic check's times follow the injected clock: none before the
// first LeaderAndIsr starts the loop, then the next one an interval
// after each run, and the last one when it ran. RunRetention is not the
// periodic check: it moves neither.
func TestRetentionCheckTimesFollowTheClock(t *testing.T) {
	h := retentionHarness(t, log.Retention{Ms: time.Hour.Milliseconds(), Bytes: -1}, time.Minute)
	if last, next := h.rm.RetentionCheckTimes(); !last.IsZero() || !next.IsZero() {
		t.Fatalf("before the first LeaderAndIsr: last %v next %v, want none", last, next)
	}
	t0 := h.clock.Now()
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	if last, next := h.rm.RetentionCheckTimes(); !last.IsZero() || !next.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after LeaderAndIsr: last %v next %v, want none and %v", last, next, t0.Add(time.Minute))
	}
	h.clock.Advance(time.Minute) // runs the check, on this goroutine
	last, next := h.rm.RetentionCheckTimes()
	if !last.Equal(t0.Add(time.Minute)) || !next.Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("after a check: last %v next %v, want %v and %v", last, next, t0.Add(time.Minute), t0.Add(2*time.Minute))
	}
	d := h.rm.Describe("", nil)
	if !d.LastRetentionCheck.Equal(last) || !d.NextRetentionCheck.Equal(next) {
		t.Fatalf("Describe: last %v next %v, want %v and %v", d.LastRetentionCheck, d.NextRetentionCheck, last, next)
	}
	h.clock.Advance(30 * time.Second)
	h.rm.RunRetention(context.Background(), "orders", nil)
	if l2, n2 := h.rm.RetentionCheckTimes(); !l2.Equal(last) || !n2.Equal(next) {
		t.Fatalf("RunRetention moved the periodic check's times: last %v next %v", l2, n2)
	}
}

// RunRetention deletes, on the leader, the segments past retention.ms
// and only those, long before the periodic check would, and says what
// it deleted and why; a second run finds nothing due.
func TestRunRetentionDeletesOnlyExpiredSegments(t *testing.T) {
	h := retentionHarness(t, log.Retention{Ms: time.Hour.Milliseconds(), Bytes: -1}, 24*time.Hour)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	for range 30 {
		h.produce(tp0, AcksLeader, "an old record, padded to fill segments quickly")
	}
	const oldEnd = 30
	h.clock.Advance(2 * time.Hour) // the first 30 records are now past retention
	for range 30 {
		h.produce(tp0, AcksLeader, "a new record, padded to fill segments quickly.")
	}
	l, _ := h.rm.logs.GetLog(tp0)
	segsBefore := l.SegmentCount()
	// What the check should delete: the segments whose every record is old.
	plan, err := l.PlanRetention(h.clock.Now().UnixMilli(), log.Retention{Ms: time.Hour.Milliseconds(), Bytes: -1})
	if err != nil || plan.Start == 0 || plan.Start > oldEnd {
		t.Fatalf("plan %+v, %v: want a start in (0, %d]", plan, err, oldEnd)
	}
	res := h.rm.RunRetention(context.Background(), "orders", nil).Results
	if len(res) != 1 {
		t.Fatalf("%d results, want 1: %+v", len(res), res)
	}
	r := res[0]
	if r.Error != ErrNone || !r.Leader || r.LogStartBefore != 0 || r.LogStartAfter != plan.Start ||
		r.DeletedSegments != segsBefore-l.SegmentCount() || r.DeletedSegments != plan.Segments ||
		r.DeletedBytes <= 0 || r.Reason != log.ReasonRetentionMs {
		t.Fatalf("result %+v; want leader, 0 -> %d, %d segments deleted, by retention.ms", r, plan.Start, segsBefore-l.SegmentCount())
	}
	if c := h.consumeAt(r.LogStartAfter - 1); c.Error != ErrOffsetOutOfRange {
		t.Fatalf("consume below the new log start: %v", c.Error)
	}
	if c := h.consumeAt(r.LogStartAfter); c.Error != ErrNone || len(c.Records) == 0 {
		t.Fatalf("consume at the new log start: %v, %d records", c.Error, len(c.Records))
	}
	if p, _ := h.describe(tp0); p.LogEndOffset != 60 || p.HighWatermark != 60 {
		t.Fatalf("retention moved the log end or HW: %+v", p)
	}
	again := h.rm.RunRetention(context.Background(), "orders", nil).Results
	if r2 := again[0]; r2.Error != ErrNone || r2.DeletedSegments != 0 || r2.Reason != "" ||
		r2.LogStartBefore != r.LogStartAfter || r2.LogStartAfter != r.LogStartAfter {
		t.Fatalf("second run %+v, want nothing due at %d", r2, r.LogStartAfter)
	}
}

// RunRetention runs on followers too, as the periodic check does (each
// replica's segments begin where its own appends fell): by retention.bytes
// here, and never above the follower's HW. A partition not hosted is
// UNKNOWN_TOPIC_OR_PARTITION; a topic with none here answers nothing.
func TestRunRetentionOnFollowersAndUnhosted(t *testing.T) {
	h := retentionHarness(t, log.Retention{Ms: -1, Bytes: 2048}, 24*time.Hour)
	tp1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	h.leaderAndIsr(1, state("orders", 1, 2, 1, []int32{1, 2}, []int32{1, 2}))
	l, _, ok := h.rm.FollowerLog(tp1)
	if !ok {
		t.Fatal("not a follower")
	}
	for i := range int64(60) {
		b := record.Build([]record.Record{{Value: []byte("a fetched record, padded to fill segments quickly")}}, 1)
		b.SetBaseOffset(i)
		b.SetLeaderEpoch(1)
		if _, err := l.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	l.UpdateHighWatermark(25) // segments of 10: up to 20 are whole below it
	one := int32(1)
	res := h.rm.RunRetention(context.Background(), "orders", &one).Results
	if len(res) != 1 {
		t.Fatalf("results %+v", res)
	}
	if r := res[0]; r.Error != ErrNone || r.Leader || r.LogStartBefore != 0 || r.LogStartAfter != 20 ||
		r.DeletedSegments != 2 || r.Reason != log.ReasonRetentionBytes {
		t.Fatalf("follower result %+v; want 0 -> 20, 2 segments, by retention.bytes", r)
	}
	if l.LogStartOffset() != 20 || l.LogEndOffset() != 60 {
		t.Fatalf("follower log [%d, %d), want [20, 60)", l.LogStartOffset(), l.LogEndOffset())
	}
	seven := int32(7)
	if res := h.rm.RunRetention(context.Background(), "orders", &seven).Results; len(res) != 1 || res[0].Error != ErrUnknownTopicOrPartition {
		t.Fatalf("unhosted partition: %+v", res)
	}
	if res := h.rm.RunRetention(context.Background(), "payments", nil).Results; len(res) != 0 {
		t.Fatalf("a topic not hosted here: %+v", res)
	}
}

// RunRetention is traced as the periodic deletion is, marked as the
// operator's.
func TestRunRetentionIsTraced(t *testing.T) {
	h, rec, caller := tracedHarness(t, func(c *Config) {
		c.Retention = &log.Retention{Ms: -1, Bytes: 0}
		c.RetentionCheckInterval = 24 * time.Hour
		c.LogConfig = log.Config{SegmentBytes: 1024, IndexIntervalBytes: 256, MaxBatchBytes: 1024, FlushPolicy: log.FlushOS}
	})
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	for range 30 {
		h.produce(tp0, AcksLeader, "a record, padded to fill segments quickly, padded")
	}
	ctx, root := caller.Start(context.Background(), "RunRetention")
	res := h.rm.RunRetention(ctx, "orders", nil).Results
	root.End()
	if len(res) != 1 || res[0].DeletedSegments == 0 {
		t.Fatalf("results %+v, want segments deleted", res)
	}
	s := oneSpan(t, rec, "ReplicaManager.deleteOldSegments")
	if s.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Fatal("the span is not the request's child")
	}
	wantAttrs(t, "deleteOldSegments", s.Attributes(), map[string]any{"replicad.trigger": "operator", "replicad.topic": "orders",
		"replicad.partitions": 1, "replicad.deleted_segments": res[0].DeletedSegments, "replicad.partition_errors": 0})
}

// RunRetention beside appends, DeleteRecords and the periodic check, for
// as long as the appends go on: the log start only rises, never above the
// HW, and the log end is never touched; a consumer at the log start reads.
func TestRunRetentionUnderConcurrentWork(t *testing.T) {
	h := retentionHarness(t, log.Retention{Ms: -1, Bytes: 3000}, time.Second)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const records = 400
	produced := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // appends
		defer wg.Done()
		defer close(produced)
		for i := 0; i < records && ctx.Err() == nil; i++ {
			if r := h.produce(tp0, AcksLeader, "a record, padded to fill segments quickly, padded"); r.Error != ErrNone {
				t.Errorf("produce: %v", r.Error)
				return
			}
		}
	}()
	done := func() bool {
		select {
		case <-produced:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	go func() { // the periodic check, and DeleteRecords of half the log now and then
		defer wg.Done()
		for i := 0; !done(); i++ {
			h.clock.Advance(time.Second)
			if i%10 == 0 {
				p, _ := h.describe(tp0)
				h.rm.DeleteRecords(ctx, DeleteRecordsRequest{Partitions: []DeleteRecordsPartition{{TopicPartition: tp0, Offset: p.HighWatermark / 2}}})
			}
		}
	}()
	go func() { // the operator
		defer wg.Done()
		var last int64
		for !done() {
			for _, r := range h.rm.RunRetention(ctx, "orders", nil).Results {
				if r.Error != ErrNone && r.Error != ErrOffsetOutOfRange {
					t.Errorf("run: %+v", r)
				}
				if r.LogStartAfter < last || r.LogStartAfter < r.LogStartBefore {
					t.Errorf("log start went back: %+v after %d", r, last)
				}
				last = r.LogStartAfter
			}
			p, _ := h.describe(tp0)
			if p.LogStartOffset > p.HighWatermark {
				t.Errorf("log start %d above the HW %d", p.LogStartOffset, p.HighWatermark)
			}
		}
	}()
	wg.Wait()
	p, _ := h.describe(tp0)
	if p.LogEndOffset != records {
		t.Fatalf("log end %d, want %d", p.LogEndOffset, records)
	}
	if c := h.consumeAt(p.LogStartOffset); p.LogStartOffset < p.HighWatermark && (c.Error != ErrNone || len(c.Records) == 0) {
		t.Fatalf("consume at the log start %d: %v", p.LogStartOffset, c.Error)
	}
	if p.LogStartOffset == 0 {
		t.Fatal("nothing was deleted: nothing exercised")
	}
}

// A partition on a failed log dir answers STORAGE_ERROR, named or with
// its topic; the others are checked all the same.
func TestRunRetentionOnAnOfflineDir(t *testing.T) {
	h := newHarness(t, 2, func(c *Config) {
		c.Retention = &log.Retention{Ms: -1, Bytes: 0}
		c.RetentionCheckInterval = 24 * time.Hour
		c.LogConfig = log.Config{SegmentBytes: 1024, IndexIntervalBytes: 256, MaxBatchBytes: 1024, FlushPolicy: log.FlushOS}
	})
	tp1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}), state("orders", 1, 1, 1, []int32{1}, []int32{1}))
	for range 30 {
		h.produce(tp1, AcksLeader, "a record, padded to fill segments quickly, padded")
	}
	dir, _ := h.rm.logs.DirOf(tp0)
	h.rm.handleLogDirFailure(dir, errors.New("disk gone"))
	res := h.rm.RunRetention(context.Background(), "orders", nil).Results
	if len(res) != 2 || res[0].TopicPartition != tp0 || res[0].Error != ErrStorageError ||
		res[1].TopicPartition != tp1 || res[1].Error != ErrNone || res[1].DeletedSegments == 0 {
		t.Fatalf("results %+v; want orders-0 STORAGE_ERROR, orders-1 checked and deleted", res)
	}
	zero := int32(0)
	if res := h.rm.RunRetention(context.Background(), "orders", &zero).Results; len(res) != 1 || res[0].Error != ErrStorageError {
		t.Fatalf("named offline partition: %+v", res)
	}
}

// RunRetention while the partition is deleted (StopReplica with delete):
// every answer is NONE, NOT_LEADER_OR_FOLLOWER (stopped during the check),
// UNKNOWN_TOPIC_OR_PARTITION (gone) or STORAGE_ERROR (its log closed under
// it), the deletion succeeds, and nothing of the log is left.
func TestRunRetentionWhileThePartitionIsDeleted(t *testing.T) {
	for round := range 5 {
		h := retentionHarness(t, log.Retention{Ms: -1, Bytes: 0}, 24*time.Hour)
		h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
		for range 30 {
			h.produce(tp0, AcksLeader, "a record, padded to fill segments quickly, padded")
		}
		dir, _ := h.rm.logs.DirOf(tp0)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, r := range h.rm.RunRetention(context.Background(), "orders", nil).Results {
					switch r.Error {
					case ErrNone, ErrNotLeaderOrFollower, ErrUnknownTopicOrPartition, ErrStorageError:
					default:
						t.Errorf("round %d: %+v", round, r)
					}
				}
			}
		}()
		time.Sleep(time.Duration(round) * time.Millisecond) // a different point of the check each round
		sr := h.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1,
			Partitions: []StopReplicaPartition{{TopicPartition: tp0, LeaderEpoch: NoEpoch, Delete: true}}})
		close(stop)
		wg.Wait()
		if sr.Error != ErrNone || len(sr.PartitionErrors) != 1 || sr.PartitionErrors[0].Error != ErrNone {
			t.Fatalf("round %d: StopReplica %+v", round, sr)
		}
		if _, ok := h.describe(tp0); ok {
			t.Fatalf("round %d: still hosted", round)
		}
		waitFor(t, func() bool {
			_, err := os.Stat(filepath.Join(dir, "orders-0"))
			return os.IsNotExist(err)
		})
	}
}
