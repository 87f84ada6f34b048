package core

import (
	"context"
	"testing"
	"time"
)

// Consume's -1 starts at the HW of the moment (a long poll from "latest"
// gets only what is produced after it), -2 at the log start offset (also
// once DeleteRecords moved it); another negative offset is INVALID_REQUEST,
// and OFFSET_OUT_OF_RANGE names the valid range.
func TestConsumeLogicalOffsets(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	for _, v := range []string{"a", "b", "c"} {
		h.produce(tp0, AcksLeader, v)
	}
	ctx := context.Background()
	done := make(chan ConsumeResult)
	go func() {
		done <- h.rm.Consume(ctx, ConsumeRequest{TopicPartition: tp0, Offset: ConsumeLatest, MinBytes: 1, MaxWait: time.Hour})
	}()
	// The last append left nobody waiting: once someone waits, the long
	// poll has resolved latest (to 3) and waits for more.
	p, _ := h.rm.onlinePartition(tp0)
	waitFor(t, p.changed.waiting)
	h.produce(tp0, AcksLeader, "d")
	select {
	case r := <-done:
		if len(r.Records) != 1 || string(r.Records[0].Value) != "d" || r.Records[0].Offset != 3 {
			t.Fatalf("long poll from latest: %+v, want only d at 3", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a long poll from latest was not woken by the append")
	}

	r := h.rm.Consume(ctx, ConsumeRequest{TopicPartition: tp0, Offset: ConsumeEarliest})
	if r.Error != ErrNone || len(r.Records) != 4 || r.Records[0].Offset != 0 || r.NextOffset != 4 {
		t.Fatalf("earliest: %+v", r)
	}
	r = h.rm.Consume(ctx, ConsumeRequest{TopicPartition: tp0, Offset: ConsumeLatest})
	if r.Error != ErrNone || len(r.Records) != 0 || r.NextOffset != 4 || r.HighWatermark != 4 {
		t.Fatalf("latest: %+v, want no records, next offset 4", r)
	}

	res := h.rm.DeleteRecords(ctx, DeleteRecordsRequest{Timeout: 10 * time.Second,
		Partitions: []DeleteRecordsPartition{{TopicPartition: tp0, Offset: 2}}})
	if len(res.Partitions) != 1 || res.Partitions[0].Error != ErrNone {
		t.Fatalf("DeleteRecords: %+v", res)
	}
	r = h.rm.Consume(ctx, ConsumeRequest{TopicPartition: tp0, Offset: ConsumeEarliest})
	if r.Error != ErrNone || len(r.Records) != 2 || r.Records[0].Offset != 2 {
		t.Fatalf("earliest after DeleteRecords to 2: %+v", r)
	}
	r = h.rm.Consume(ctx, ConsumeRequest{TopicPartition: tp0, Offset: 1})
	if r.Error != ErrOffsetOutOfRange || r.LogStartOffset != 2 || r.HighWatermark != 4 {
		t.Fatalf("offset below the log start: %+v, want OFFSET_OUT_OF_RANGE naming [2, 4]", r)
	}
	r = h.rm.Consume(ctx, ConsumeRequest{TopicPartition: tp0, Offset: 9})
	if r.Error != ErrOffsetOutOfRange || r.LogStartOffset != 2 || r.HighWatermark != 4 {
		t.Fatalf("offset past the end: %+v, want OFFSET_OUT_OF_RANGE naming [2, 4]", r)
	}
	if r = h.rm.Consume(ctx, ConsumeRequest{TopicPartition: tp0, Offset: -3}); r.Error != ErrInvalidRequest {
		t.Fatalf("offset -3: %+v, want INVALID_REQUEST", r)
	}
	h.leaderAndIsr(1, state("orders", 0, 2, 2, []int32{1, 2}, []int32{2}))
	if r = h.rm.Consume(ctx, ConsumeRequest{TopicPartition: tp0, Offset: ConsumeLatest}); r.Error != ErrNotLeaderOrFollower {
		t.Fatalf("latest on a follower: %+v, want NOT_LEADER_OR_FOLLOWER", r)
	}
}
