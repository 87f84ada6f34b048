package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/core/tp"
)

// A LeaderAndIsr naming a legal topic whose dir name cannot fit Linux's 255
// bytes (a 249-character topic at partition 100000) fails that partition as
// a request error: the log dir stays online, the broker keeps its other
// partitions, and a delete of a long topic's partition works (issue 12).
func TestLongPartitionNameIsARequestErrorNotADiskFailure(t *testing.T) {
	h := newHarness(t, 1)
	long := strings.Repeat("t", tp.MaxTopicLength)
	tooLong := tp.TopicPartition{Topic: long, Partition: 100000}
	fits := tp.TopicPartition{Topic: long, Partition: 99999}
	r := h.leaderAndIsr(1,
		state(long, 100000, 1, 1, []int32{1}, []int32{1}),
		state(long, 99999, 1, 1, []int32{1}, []int32{1}),
		state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	if got := codeOf(r, tooLong); got != ErrInvalidRequest {
		t.Fatalf("256-byte dir name: %v, want INVALID_REQUEST", got)
	}
	if got := codeOf(r, fits); got != ErrNone {
		t.Fatalf("255-byte dir name: %v", got)
	}
	if got := codeOf(r, tp0); got != ErrNone {
		t.Fatalf("orders-0: %v", got)
	}
	time.Sleep(50 * time.Millisecond) // a dir failure is handled asynchronously
	for _, d := range h.rm.Describe("", nil).LogDirs {
		if !d.Online {
			t.Fatalf("log dir %s offline after a request named a partition too long for it", d.Path)
		}
	}
	if res := h.produce(tp0, 1, "v"); res.Error != ErrNone {
		t.Fatalf("produce to orders-0 after: %v", res.Error)
	}
	// Deleting the long one renames its dir to a "-delete" name that fits.
	resp := h.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1,
		Partitions: []StopReplicaPartition{{TopicPartition: fits, LeaderEpoch: -1, Delete: true}}})
	if resp.Error != ErrNone || resp.PartitionErrors[0].Error != ErrNone {
		t.Fatalf("delete of %d-byte partition name: %+v", len(fits.String()), resp)
	}
	time.Sleep(50 * time.Millisecond)
	for _, d := range h.rm.Describe("", nil).LogDirs {
		if !d.Online {
			t.Fatalf("log dir %s offline after deleting a long-named partition", d.Path)
		}
	}
	if res := h.produce(tp0, 1, "v"); res.Error != ErrNone {
		t.Fatalf("produce to orders-0 after the delete: %v", res.Error)
	}
}
