package core

import (
	"context"
	"testing"

	"github.com/replicad/replicad/core/tp"
)

// A StopReplica deleting many partitions at once (a topic deletion) deletes
// every one of them in one batch, keeps the partitions it does not name
// with their records, and after a restart the deleted ones stay gone.
func TestStopReplicaDeletesManyInOneBatch(t *testing.T) {
	h := newHarness(t, 2)
	var states []PartitionState
	for p := int32(0); p < 40; p++ {
		states = append(states, state("gone", p, 1, 1, []int32{1}, []int32{1}))
	}
	states = append(states, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	h.leaderAndIsr(1, states...)
	if res := h.produce(tp0, 1, "a", "b"); res.Error != ErrNone {
		t.Fatalf("produce: %v", res.Error)
	}
	req := StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1}
	for p := int32(0); p < 40; p++ {
		if res := h.produce(tp.TopicPartition{Topic: "gone", Partition: p}, 1, "x"); res.Error != ErrNone {
			t.Fatalf("produce: %v", res.Error)
		}
		req.Partitions = append(req.Partitions, StopReplicaPartition{TopicPartition: tp.TopicPartition{Topic: "gone", Partition: p},
			LeaderEpoch: 1, Delete: true})
	}
	resp := h.rm.StopReplicas(context.Background(), req)
	for _, pe := range resp.PartitionErrors {
		if pe.Error != ErrNone {
			t.Fatalf("StopReplica %v: %v", pe.TopicPartition, pe.Error)
		}
	}
	check := func(when string) {
		t.Helper()
		for p := int32(0); p < 40; p++ {
			t1 := tp.TopicPartition{Topic: "gone", Partition: p}
			if _, ok := h.describe(t1); ok {
				t.Fatalf("%s: %v still hosted", when, t1)
			}
			if _, ok := h.rm.logs.GetLog(t1); ok {
				t.Fatalf("%s: %v still has a log", when, t1)
			}
		}
		if l, ok := h.rm.logs.GetLog(tp0); !ok || l.LogEndOffset() != 2 {
			t.Fatalf("%s: orders-0 lost its records", when)
		}
	}
	check("after StopReplica")
	h.restart()
	check("after a restart")
}
