package core_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

var idem = tp.TopicPartition{Topic: "idem", Partition: 0}

// becomeIdem gives rm the partition's state at leaderEpoch, led by leader.
func becomeIdem(t *testing.T, rm *core.ReplicaManager, leader, leaderEpoch int32, isNew bool) {
	t.Helper()
	resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{
		ControllerID: 0, ControllerEpoch: 1, BrokerEpoch: -1,
		PartitionStates: []core.PartitionState{{TopicPartition: idem, ControllerEpoch: 1, Leader: leader,
			LeaderEpoch: leaderEpoch, PartitionEpoch: leaderEpoch, ISR: []int32{leader}, Replicas: []int32{3, 1}, IsNew: isNew}},
		LiveLeaders: []core.Broker{{ID: 3, Host: "b3", Port: 9092}, {ID: 1, Host: "b1", Port: 9091}},
	})
	if c := resp.PartitionErrors[0].Error; c != core.ErrNone {
		t.Fatalf("LeaderAndIsr: %s", c)
	}
}

func produceIdem(t *testing.T, rm *core.ReplicaManager, p record.Producer, n int) core.ProduceResult {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v")}
	}
	res := rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: idem, Acks: 1, Records: recs, Producer: p})
	if res.Error != core.ErrNone {
		t.Fatalf("produce %+v: %s %s", p, res.Error, res.Message)
	}
	return res
}

func describeIdem(rm *core.ReplicaManager) core.PartitionInfo {
	p := idem.Partition
	for _, pi := range rm.Describe(idem.Topic, &p).Partitions {
		return pi
	}
	return core.PartitionInfo{}
}

// TestFollowerTruncationRebuildsProducerState: broker 1 leads epoch 0 and
// appends batches of producer 7 that nobody replicates; broker 3 leads
// epoch 1 with other batches; broker 1 follows it, its real fetcher
// truncates the diverging batches away and replicates broker 3's log:
// broker 1's producer state is then broker 3's, to the batch.
func TestFollowerTruncationRebuildsProducerState(t *testing.T) {
	var leader *core.ReplicaManager
	follower, _ := followerOf(t, func(ctx context.Context, req core.FetchRequest) core.FetchResponse {
		return leader.FetchMessages(ctx, req)
	})
	leader = brokerRM(t, 3, nil)

	becomeIdem(t, follower, 1, 0, true) // broker 1 leads epoch 0
	for i := range 3 {
		produceIdem(t, follower, record.Producer{ID: 7, BaseSequence: int32(2 * i)}, 2)
	}
	if n := describeIdem(follower).ProducerCount; n != 1 {
		t.Fatalf("old leader holds %d producers", n)
	}

	becomeIdem(t, leader, 3, 1, true) // broker 3 leads epoch 1, without them
	produceIdem(t, leader, record.Producer{ID: 8}, 3)
	produceIdem(t, leader, record.Producer{ID: 7}, 1)
	produceIdem(t, leader, record.Producer{ID: 8, BaseSequence: 3}, 2)

	becomeIdem(t, follower, 3, 1, false) // broker 1 follows
	want := describeIdem(leader)
	// The same LEO (6) either way: what tells is the data, and its epochs.
	var got core.PartitionInfo
	waitFor(t, "the follower's producers became the leader's", func() bool {
		got = describeIdem(follower)
		return got.LogEndOffset == want.LogEndOffset && reflect.DeepEqual(got.Producers, want.Producers)
	})
	// To the batch: the old leader's batches of producer 7 must be gone,
	// not kept under the new ones (a retry of them would be a duplicate).
	fl, _ := follower.LocalLog(idem)
	ll, _ := leader.LocalLog(idem)
	if !fl.ProducerState().Equal(ll.ProducerState()) || got.ProducerCount != 2 {
		t.Fatalf("follower's state %+v, the leader's %+v", fl.ProducerState().Get(7), ll.ProducerState().Get(7))
	}
}
