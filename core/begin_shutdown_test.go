package core

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/replicad/replicad/core/tp"
)

// A StopReplica with delete that arrives once the broker is leaving still
// takes its partitions down and deletes their logs. Skipping them (an
// earlier version did, to exit sooner) left a reassignment's removed leader
// hosted as leader: it took acks=1 writes the new leader never sees, and no
// resend ever removed its log. Batched deletes keep this fast.
func TestStopReplicaStillStopsAndDeletesOnceLeaving(t *testing.T) {
	h := newHarness(t, 1)
	tp1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}), state("orders", 1, 1, 1, []int32{1}, []int32{1}))
	h.produce(tp0, AcksLeader, "a")
	h.rm.BeginShutdown()
	r := h.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1, Partitions: []StopReplicaPartition{
		{TopicPartition: tp0, LeaderEpoch: 1, Delete: true}, {TopicPartition: tp1, LeaderEpoch: 1, Delete: false}}})
	if r.Error != ErrNone || r.PartitionErrors[0].Error != ErrNone || r.PartitionErrors[1].Error != ErrNone {
		t.Fatalf("StopReplica once leaving: %+v, want NONE for both", r)
	}
	if res := h.produce(tp0, AcksLeader, "lost"); res.Error == ErrNone {
		t.Fatalf("acks=1 produce to a partition stopped while leaving was accepted: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(h.dirs[0], "orders-0")); !os.IsNotExist(err) {
		t.Fatalf("the deleted log's dir: %v, want it gone", err)
	}
}

// A LeaderAndIsr once the broker is leaving creates no log: the partitions
// it would create are answered BROKER_NOT_AVAILABLE and left un-hosted (not
// offline), while a leadership change of an existing log applies, and a
// follower transition starts no fetcher and stops the one kept.
func TestLeaderAndIsrCreatesNoLogOnceLeaving(t *testing.T) {
	h := newHarness(t, 1)
	tp1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	tp2 := tp.TopicPartition{Topic: "orders", Partition: 2}
	tp3 := tp.TopicPartition{Topic: "orders", Partition: 3}
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}), state("orders", 1, 2, 1, []int32{1, 2}, []int32{1, 2}))
	if _, ok := h.fetchers.fetching(tp1); !ok {
		t.Fatal("no fetcher for the follower before the shutdown")
	}
	h.rm.BeginShutdown()
	moved := state("orders", 0, 2, 2, []int32{1, 2}, []int32{2})
	moved.IsNew = false
	shrunk := state("orders", 1, 2, 1, []int32{1, 2}, []int32{2})
	shrunk.IsNew, shrunk.PartitionEpoch = false, 1
	r := h.leaderAndIsr(1, moved, shrunk, state("orders", 2, 1, 1, []int32{1}, []int32{1}), state("orders", 3, 2, 1, []int32{1, 2}, []int32{1, 2}))
	for t1, want := range map[tp.TopicPartition]ErrorCode{tp0: ErrNone, tp1: ErrNone, tp2: ErrBrokerNotAvailable, tp3: ErrBrokerNotAvailable} {
		if got := codeOf(r, t1); got != want {
			t.Errorf("%v: %v, want %v", t1, got, want)
		}
	}
	if p, _ := h.describe(tp0); p.Leader != 2 || p.LeaderEpoch != 2 {
		t.Errorf("existing log: leader %d epoch %d, want the move to broker 2 at epoch 2 applied", p.Leader, p.LeaderEpoch)
	}
	for _, t1 := range []tp.TopicPartition{tp2, tp3} {
		if p, ok := h.describe(t1); ok {
			t.Errorf("%v hosted (%+v) although its log was not created", t1, p)
		}
		if _, err := os.Stat(filepath.Join(h.dirs[0], t1.String())); !os.IsNotExist(err) {
			t.Errorf("%v: a log dir was created: %v", t1, err)
		}
	}
	for _, t1 := range []tp.TopicPartition{tp0, tp1} {
		if _, ok := h.fetchers.fetching(t1); ok {
			t.Errorf("%v: still fetched by a leaving broker", t1)
		}
	}
	if len(h.rm.OfflinePartitions()) != 0 {
		t.Errorf("offline partitions: %v", h.rm.OfflinePartitions())
	}
}
