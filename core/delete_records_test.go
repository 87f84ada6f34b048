package core

import (
	"context"
	"testing"
	"time"

	"github.com/replicad/replicad/core/tp"
)

// DeleteRecords raises the leader's log start at once (a consume below it
// is OFFSET_OUT_OF_RANGE), then answers once the ISR's follower says, in a
// fetch, that it raised its own; past the HW, or off the leader, it is
// refused and changes nothing.
func TestDeleteRecordsWaitsForTheIsr(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	for range 5 {
		h.produce(tp0, AcksLeader, "v")
	}
	if r := h.fetch(2, fetchAt(5, 1)); r.HighWatermark != 5 {
		t.Fatalf("HW %d after the follower caught up, want 5", r.HighWatermark)
	}
	del := func(offset int64, timeout time.Duration) DeleteRecordsResult {
		return h.rm.DeleteRecords(context.Background(), DeleteRecordsRequest{Timeout: timeout,
			Partitions: []DeleteRecordsPartition{{TopicPartition: tp0, Offset: offset}}}).Partitions[0]
	}
	if r := del(6, time.Second); r.Error != ErrOffsetOutOfRange {
		t.Fatalf("delete past the HW: %+v, want OFFSET_OUT_OF_RANGE", r)
	}
	other := tp.TopicPartition{Topic: "nope"}
	if r := h.rm.DeleteRecords(context.Background(), DeleteRecordsRequest{Partitions: []DeleteRecordsPartition{{TopicPartition: other, Offset: 1}}}).Partitions[0]; r.Error != ErrUnknownTopicOrPartition {
		t.Fatalf("delete on an unknown partition: %+v", r)
	}
	if p, _ := h.describe(tp0); p.LogStartOffset != 0 {
		t.Fatalf("a refused delete moved the log start to %d", p.LogStartOffset)
	}

	done := make(chan DeleteRecordsResult, 1)
	go func() { done <- del(3, time.Hour) }()
	waitFor(t, func() bool { p, _ := h.describe(tp0); return p.LogStartOffset == 3 })
	if c := h.consumeAt(1); c.Error != ErrOffsetOutOfRange {
		t.Fatalf("a consume below the new log start: %v, want OFFSET_OUT_OF_RANGE", c.Error)
	}
	if c := h.consumeAt(3); c.Error != ErrNone || len(c.Records) != 2 {
		t.Fatalf("a consume at the new log start: %v, %d records; want the 2 left", c.Error, len(c.Records))
	}
	select {
	case r := <-done:
		t.Fatalf("DeleteRecords answered before the follower deleted: %+v", r)
	case <-time.After(50 * time.Millisecond):
	}
	// The follower's next fetch says it raised its log start.
	fp := fetchAt(5, 1)
	fp.LogStartOffset = 3
	if r := h.fetch(2, fp); r.LogStartOffset != 3 {
		t.Fatalf("the fetch answered log start %d, want 3 (the follower follows it)", r.LogStartOffset)
	}
	select {
	case r := <-done:
		if r.Error != ErrNone || r.LowWatermark != 3 {
			t.Fatalf("DeleteRecords: %+v, want low watermark 3", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("DeleteRecords did not answer once the ISR had deleted")
	}
	// The HW sentinel deletes everything committed; with the ISR behind and
	// no time, the answer is REQUEST_TIMED_OUT, and the leader's deletion stands.
	if r := del(DeleteRecordsHighWatermark, 0); r.Error != ErrRequestTimedOut || r.LowWatermark != 3 {
		t.Fatalf("delete to the HW with no time for the ISR: %+v, want REQUEST_TIMED_OUT at low watermark 3", r)
	}
	if p, _ := h.describe(tp0); p.LogStartOffset != 5 {
		t.Fatalf("log start %d after deleting to the HW, want 5", p.LogStartOffset)
	}
}
