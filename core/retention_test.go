package core

import (
	"testing"
	"time"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// The retention check, on its interval, has the leader delete the whole
// segments older than retention (by their newest record), never above the
// HW; a partition it does not lead keeps everything.
func TestRetentionDeletesOldSegmentsOnTheLeader(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) {
		c.Retention = &log.Retention{Ms: time.Hour.Milliseconds(), Bytes: -1}
		c.RetentionCheckInterval = time.Minute
		c.LogConfig = log.Config{SegmentBytes: 1024, IndexIntervalBytes: 256, MaxBatchBytes: 1024, FlushPolicy: log.FlushOS}
		c.ReplicaLagTimeMax = 24 * time.Hour // no ISR shrink check meddling
	})
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}), state("orders", 1, 2, 1, []int32{1, 2}, []int32{1, 2}))
	for range 30 {
		h.produce(tp0, AcksLeader, "an old record, padded to fill segments quickly")
	}
	oldEnd := int64(30)
	h.clock.Advance(2 * time.Hour) // the first 30 records are now older than retention
	for range 30 {
		h.produce(tp0, AcksLeader, "a new record, padded to fill segments quickly.")
	}
	waitFor(t, func() bool {
		h.clock.Advance(time.Minute)
		p, _ := h.describe(tp0)
		return p.LogStartOffset > 0
	})
	p, _ := h.describe(tp0)
	if p.LogStartOffset > oldEnd {
		t.Fatalf("retention raised the log start to %d, past the last old record %d: new records deleted", p.LogStartOffset, oldEnd-1)
	}
	if c := h.consumeAt(0); c.Error != ErrOffsetOutOfRange {
		t.Fatalf("consume of a deleted record: %v", c.Error)
	}
	if c := h.consumeAt(oldEnd); c.Error != ErrNone || len(c.Records) == 0 {
		t.Fatalf("consume of a kept record: %v, %d records", c.Error, len(c.Records))
	}
	// More time: the new records go too, all but the active segment.
	h.clock.Advance(2 * time.Hour)
	waitFor(t, func() bool {
		h.clock.Advance(time.Minute)
		p, _ := h.describe(tp0)
		return p.LogStartOffset > oldEnd
	})
	if p, _ := h.describe(tp0); p.LogEndOffset != 60 {
		t.Fatalf("retention changed the log end: %d", p.LogEndOffset)
	}
}

// A follower applies retention to its own segments on the same check, as
// Kafka's followers do: its segments begin where its appends fell, so the
// leader's log start alone can leave it over retention (or, when the
// leader's segments are larger, with everything). Only segments below its
// HW go: it deletes committed records only.
func TestRetentionDeletesOldSegmentsOnFollowers(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) {
		c.Retention = &log.Retention{Ms: -1, Bytes: 2048}
		c.RetentionCheckInterval = time.Minute
		c.LogConfig = log.Config{SegmentBytes: 1024, IndexIntervalBytes: 256, MaxBatchBytes: 1024, FlushPolicy: log.FlushOS}
		c.ReplicaLagTimeMax = 24 * time.Hour
	})
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
	// What the leader has said is committed: 25 of 60 records, in 6
	// segments of 10 (1,010 bytes each).
	const hw = 25
	l.UpdateHighWatermark(hw)
	if l.SegmentCount() < 6 {
		t.Fatalf("%d segments, want several", l.SegmentCount())
	}
	waitFor(t, func() bool {
		h.clock.Advance(time.Minute)
		return l.LogStartOffset() > 0
	})
	// More checks: by size, segments up to 30 would go (2,020 bytes would
	// be left, just under 2,048), but only those whole below the HW do.
	for range 3 {
		h.clock.Advance(time.Minute)
	}
	waitFor(t, func() bool { return l.SegmentCount() == 4 })
	if start := l.LogStartOffset(); start != 20 {
		t.Fatalf("follower retention raised the log start to %d, want 20 (the last segment whole below its HW %d)", start, hw)
	}
	if l.LogEndOffset() != 60 {
		t.Fatalf("retention changed the log end: %d", l.LogEndOffset())
	}
}
