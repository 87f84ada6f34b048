package core

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/replicad/replicad/core/tp"
)

// leaderAndIsrAt sends a LeaderAndIsr carrying brokerEpoch.
func (h *harness) leaderAndIsrAt(brokerEpoch int64, ctrlEpoch int32, states ...PartitionState) LeaderAndIsrResponse {
	h.t.Helper()
	return h.rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: ctrlEpoch,
		BrokerEpoch: brokerEpoch, PartitionStates: states,
		LiveLeaders: []Broker{{ID: 2, Host: "127.0.0.1", Port: 9092}, {ID: 3, Host: "127.0.0.1", Port: 9093}}})
}

// LeaderAndIsr, StopReplica and UpdateMetadata meant for an earlier
// incarnation of this broker (a positive broker epoch below the current one)
// answer STALE_BROKER_EPOCH as a whole and change nothing, not even the
// controller epoch; epoch 0 (no controller) and newer epochs are accepted.
func TestStaleBrokerEpochFencesControllerRequests(t *testing.T) {
	var epoch atomic.Int64
	epoch.Store(10)
	h := newHarness(t, 1, func(c *Config) { c.BrokerEpoch = epoch.Load })
	tp1 := tp.TopicPartition{Topic: "orders", Partition: 1}

	if r := h.leaderAndIsrAt(10, 1, state("orders", 0, 2, 1, []int32{1, 2}, []int32{1, 2})); r.Error != ErrNone || codeOf(r, tp0) != ErrNone {
		t.Fatalf("current broker epoch: %+v", r)
	}
	r := h.leaderAndIsrAt(9, 2, state("orders", 0, 1, 2, []int32{1, 2}, []int32{1, 2}), state("orders", 1, 1, 1, []int32{1}, []int32{1}))
	if r.Error != ErrStaleBrokerEpoch || codeOf(r, tp0) != ErrStaleBrokerEpoch || codeOf(r, tp1) != ErrStaleBrokerEpoch {
		t.Fatalf("stale broker epoch: %+v, want STALE_BROKER_EPOCH throughout", r)
	}
	if p, _ := h.describe(tp0); p.LeaderEpoch != 1 || p.Role != RoleFollower {
		t.Fatalf("a stale LeaderAndIsr changed the partition: %+v", p)
	}
	if _, ok := h.describe(tp1); ok {
		t.Fatal("a stale LeaderAndIsr created a partition")
	}
	if got := h.rm.ControllerEpoch(); got != 1 {
		t.Fatalf("controller epoch %d after a stale request, want 1", got)
	}

	sr := h.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1, BrokerEpoch: 9,
		Partitions: []StopReplicaPartition{{TopicPartition: tp0, LeaderEpoch: NoEpoch, Delete: true}}})
	if sr.Error != ErrStaleBrokerEpoch || len(sr.PartitionErrors) != 1 || sr.PartitionErrors[0].Error != ErrStaleBrokerEpoch {
		t.Fatalf("stale StopReplica: %+v", sr)
	}
	if _, ok := h.describe(tp0); !ok {
		t.Fatal("a stale StopReplica stopped the replica")
	}
	if _, ok := h.fetchers.fetching(tp0); !ok {
		t.Fatal("a stale StopReplica removed the fetcher")
	}
	if code := h.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1, BrokerEpoch: 9}); code != ErrStaleBrokerEpoch {
		t.Fatalf("stale UpdateMetadata: %v", code)
	}
	if got := len(h.rm.LiveBrokers()); got != 2 {
		t.Fatalf("a stale UpdateMetadata replaced the live brokers: %d left", got)
	}

	// Epoch 0: a hand-driven request, accepted.
	if r := h.leaderAndIsrAt(0, 1, state("orders", 0, 2, 2, []int32{1, 2}, []int32{1, 2})); codeOf(r, tp0) != ErrNone {
		t.Fatalf("broker epoch 0: %+v", r)
	}
	// Newer than this broker knows (the controller's answer to a
	// re-registration is still on its way): accepted.
	if r := h.leaderAndIsrAt(11, 1, state("orders", 0, 2, 3, []int32{1, 2}, []int32{1, 2})); codeOf(r, tp0) != ErrNone {
		t.Fatalf("newer broker epoch: %+v", r)
	}
	// The broker re-registers: 10 is now stale too.
	epoch.Store(12)
	if r := h.leaderAndIsrAt(10, 1, state("orders", 0, 2, 4, []int32{1, 2}, []int32{1, 2})); r.Error != ErrStaleBrokerEpoch {
		t.Fatalf("epoch of the previous registration: %+v", r)
	}
	sr = h.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1, BrokerEpoch: 12,
		Partitions: []StopReplicaPartition{{TopicPartition: tp0, LeaderEpoch: NoEpoch}}})
	if sr.Error != ErrNone || sr.PartitionErrors[0].Error != ErrNone {
		t.Fatalf("current StopReplica: %+v", sr)
	}
	if _, ok := h.describe(tp0); ok {
		t.Fatal("replica still hosted after a current StopReplica")
	}
}

// Without Config.BrokerEpoch (no controller) the broker epoch of a request is
// not checked.
func TestNoBrokerEpochCheckWithoutController(t *testing.T) {
	h := newHarness(t, 1)
	if r := h.leaderAndIsrAt(5, 1, state("orders", 0, 1, 1, []int32{1}, []int32{1})); r.Error != ErrNone || codeOf(r, tp0) != ErrNone {
		t.Fatalf("got %+v", r)
	}
}

// A LeaderAndIsr with leader -1 (the controller found no live ISR member)
// makes the broker a follower of nobody: the leader epoch and assignment are
// taken, the fetcher from the old leader is removed and none is added; a
// later LeaderAndIsr naming a leader starts fetching again.
func TestBecomeFollowerWithoutLeader(t *testing.T) {
	h := newHarness(t, 1)
	if r := h.leaderAndIsr(1, state("orders", 0, 2, 1, []int32{1, 2}, []int32{1, 2})); codeOf(r, tp0) != ErrNone {
		t.Fatalf("follow broker 2: %v", codeOf(r, tp0))
	}
	if _, ok := h.fetchers.fetching(tp0); !ok {
		t.Fatal("no fetcher from broker 2")
	}
	removed := len(h.fetchers.removed)

	leaderless := state("orders", 0, noLeader, 2, []int32{1, 2}, nil)
	leaderless.PartitionEpoch = 3
	if r := h.leaderAndIsr(1, leaderless); r.Error != ErrNone || codeOf(r, tp0) != ErrNone {
		t.Fatalf("leaderless: %+v", r)
	}
	if _, ok := h.fetchers.fetching(tp0); ok {
		t.Fatal("still fetching after the partition lost its leader")
	}
	if len(h.fetchers.removed) == removed {
		t.Fatal("the fetcher from the old leader was not removed")
	}
	p, ok := h.describe(tp0)
	if !ok || p.Role != RoleFollower || p.Leader != noLeader || p.LeaderEpoch != 2 || p.PartitionEpoch != 3 || p.LogEndOffset != 0 {
		t.Fatalf("leaderless partition: %+v", p)
	}
	// The same leaderless state again is an old epoch.
	if r := h.leaderAndIsr(1, leaderless); codeOf(r, tp0) != ErrStaleControllerEpoch {
		t.Fatalf("repeated leaderless state: %v", codeOf(r, tp0))
	}

	if r := h.leaderAndIsr(1, state("orders", 0, 3, 3, []int32{1, 2, 3}, []int32{3})); codeOf(r, tp0) != ErrNone {
		t.Fatalf("new leader: %v", codeOf(r, tp0))
	}
	s, ok := h.fetchers.fetching(tp0)
	if !ok || s.Leader.Addr() != "127.0.0.1:9093" || s.LeaderEpoch != 3 {
		t.Fatalf("fetcher after a leader was elected: %+v %v", s, ok)
	}
}

// A leader told its partition has no leader any more stops leading (produce
// answers NOT_LEADER_OR_FOLLOWER) and fetches from nobody; a partition new to
// the broker that arrives leaderless is hosted with its log but no fetcher.
func TestLeaderAndNewReplicaWithoutLeader(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	if r := h.produce(tp0, AcksLeader, "a"); r.Error != ErrNone {
		t.Fatalf("produce on the leader: %+v", r)
	}
	if r := h.leaderAndIsr(1, state("orders", 0, noLeader, 2, []int32{1, 2}, nil)); codeOf(r, tp0) != ErrNone {
		t.Fatalf("leaderless: %v", codeOf(r, tp0))
	}
	if r := h.produce(tp0, AcksLeader, "b"); r.Error != ErrNotLeaderOrFollower {
		t.Fatalf("produce on a leaderless partition: %+v, want NOT_LEADER_OR_FOLLOWER", r)
	}
	if p, _ := h.describe(tp0); p.Role != RoleFollower || p.Leader != noLeader || p.LeaderEpoch != 2 || p.LogEndOffset != 1 {
		t.Fatalf("former leader: %+v", p)
	}
	if _, ok := h.fetchers.fetching(tp0); ok {
		t.Fatal("a leaderless partition got a fetcher")
	}

	tp1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	if r := h.leaderAndIsr(1, state("orders", 1, noLeader, 4, []int32{1, 2}, nil)); codeOf(r, tp1) != ErrNone {
		t.Fatalf("new leaderless replica: %v", codeOf(r, tp1))
	}
	if _, ok := h.rm.logs.GetLog(tp1); !ok {
		t.Fatal("no log for a new leaderless replica")
	}
	if p, ok := h.describe(tp1); !ok || p.Leader != noLeader || p.LeaderEpoch != 4 {
		t.Fatalf("new leaderless replica: %+v %v", p, ok)
	}
	if _, ok := h.fetchers.fetching(tp1); ok {
		t.Fatal("a new leaderless replica got a fetcher")
	}
}
