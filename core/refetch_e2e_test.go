package core_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/fetcher"
)

const (
	deletedTopicID   = "vXbx7Hc8TC2-LWVSwTLY7g"
	recreatedTopicID = "AQIDBAUGBwgJCgsMDQ4PEA"
)

var recreated = tp.TopicPartition{Topic: "recreated", Partition: 0}

// A topic is deleted and created again; the follower (broker 1) and its
// leader (broker 3) take the new topic's LeaderAndIsr in either order. The
// follower must end up fetching the new topic and catch up, whichever
// comes first. When the follower comes first, the leader answers its
// fetches for another topic ID until it catches up, and the next
// LeaderAndIsr the follower gets keeps the leader and leader epoch (an ISR
// change): before, the fetcher set the partition aside on the first such
// answer and that LeaderAndIsr, "the same leader", did not add it back, so
// the follower never fetched again (simulation seed 244401447).
func TestRecreatedTopicFollowerCatchesUpInEitherOrder(t *testing.T) {
	for _, followerFirst := range []bool{true, false} {
		name := "leader first"
		if followerFirst {
			name = "follower first"
		}
		t.Run(name, func(t *testing.T) {
			var leader *core.ReplicaManager
			var mismatches atomic.Int32
			follower, fetchers := followerOf(t, func(ctx context.Context, req core.FetchRequest) core.FetchResponse {
				resp := leader.FetchMessages(ctx, req)
				for _, p := range resp.Partitions {
					if p.Error == core.ErrInconsistentTopicID {
						mismatches.Add(1)
					}
				}
				return resp
			})
			leader = brokerRM(t, 3, nil)

			// The deleted topic: both replicas hold it, with records.
			becomeRecreatedReplica(t, leader, deletedTopicID, 0)
			produceTo(t, leader, "old-0", "old-1", "old-2")
			becomeRecreatedReplica(t, follower, deletedTopicID, 0)
			waitRecreated(t, follower, deletedTopicID, 3)

			// The topic is deleted and created again. Each broker takes the
			// StopReplica of the old topic, then the new topic's
			// LeaderAndIsr (leader epoch 0 again), in its own time.
			leaderTakesNewTopic := func() {
				stopRecreated(t, leader, deletedTopicID)
				becomeRecreatedReplica(t, leader, recreatedTopicID, 0)
				produceTo(t, leader, "new-0", "new-1")
			}
			followerTakesNewTopic := func() {
				stopRecreated(t, follower, deletedTopicID)
				becomeRecreatedReplica(t, follower, recreatedTopicID, 0)
			}
			if followerFirst {
				followerTakesNewTopic()
				waitFor(t, "the leader answered for another topic ID", func() bool { return mismatches.Load() > 0 })
				leaderTakesNewTopic()
				// The ISR change the follower's absence causes: the same
				// leader and leader epoch, a new partition epoch.
				becomeRecreatedReplica(t, follower, recreatedTopicID, 1)
			} else {
				leaderTakesNewTopic()
				waitFor(t, "the leader answered for another topic ID", func() bool { return mismatches.Load() > 0 })
				followerTakesNewTopic()
			}
			waitRecreated(t, follower, recreatedTopicID, 2)
			if fetchers.IsFailed(recreated) {
				t.Fatal("the follower's partition is still set aside")
			}
		})
	}
}

// followerOf is broker 1 with a real fetcher manager whose leader, broker 3,
// answers with leaderFetch.
func followerOf(t *testing.T, leaderFetch fetcher.LocalSource) (*core.ReplicaManager, *fetcher.Manager) {
	t.Helper()
	var rm *core.ReplicaManager
	m, err := fetcher.NewManager(fetcher.Config{
		BrokerID: 1, BrokerEpoch: func() int64 { return -1 },
		MaxWait: 20 * time.Millisecond,
		Client:  fetcher.NewLocalClient(3, leaderFetch),
		Replicas: fetcher.ReplicasFunc(func(t tp.TopicPartition) (fetcher.Replica, bool) {
			l, epoch, ok := rm.FollowerLog(t)
			if !ok {
				return nil, false
			}
			return fetcher.NewLogReplica(l, epoch), true
		}),
		PartitionBackoff: 10 * time.Millisecond,
		Clock:            clock.Real{},
		Logger:           zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Shutdown)
	rm = brokerRM(t, 1, m)
	return rm, m
}

func brokerRM(t *testing.T, id int32, fetchers core.FetcherManager) *core.ReplicaManager {
	t.Helper()
	rm, err := core.NewReplicaManager(core.Config{
		BrokerID: id, LogDirs: []string{t.TempDir()}, Clock: clock.Real{}, Logger: zerolog.Nop(),
		HWCheckpointInterval: time.Hour, Fetchers: fetchers,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Shutdown(context.Background()) })
	return rm
}

// becomeRecreatedReplica gives rm the state of the partition of topicID:
// led by broker 3 at leader epoch 0, replicas [3 1], ISR [3].
func becomeRecreatedReplica(t *testing.T, rm *core.ReplicaManager, topicID string, partitionEpoch int32) {
	t.Helper()
	resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{
		ControllerID: 0, ControllerEpoch: 1, BrokerEpoch: -1,
		PartitionStates: []core.PartitionState{{TopicPartition: recreated, TopicID: topicID, ControllerEpoch: 1, Leader: 3,
			LeaderEpoch: 0, PartitionEpoch: partitionEpoch, ISR: []int32{3}, Replicas: []int32{3, 1}, IsNew: partitionEpoch == 0}},
		LiveLeaders: []core.Broker{{ID: 3, Host: "b3", Port: 9092}},
	})
	if c := resp.PartitionErrors[0].Error; c != core.ErrNone {
		t.Fatalf("LeaderAndIsr of %s: %s", topicID, c)
	}
}

func stopRecreated(t *testing.T, rm *core.ReplicaManager, topicID string) {
	t.Helper()
	resp := rm.StopReplicas(context.Background(), core.StopReplicaRequest{ControllerEpoch: 1, BrokerEpoch: -1,
		Partitions: []core.StopReplicaPartition{{TopicPartition: recreated, LeaderEpoch: core.NoEpoch, Delete: true, TopicID: topicID}}})
	if resp.Error != core.ErrNone || resp.PartitionErrors[0].Error != core.ErrNone {
		t.Fatalf("StopReplica of %s: %+v", topicID, resp)
	}
}

func produceTo(t *testing.T, rm *core.ReplicaManager, values ...string) {
	t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	if res := rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: recreated, Acks: 1, Records: recs}); res.Error != core.ErrNone {
		t.Fatalf("produce: %s %s", res.Error, res.Message)
	}
}

// waitRecreated waits until rm's replica is of topicID and ends at leo.
func waitRecreated(t *testing.T, rm *core.ReplicaManager, topicID string, leo int64) {
	t.Helper()
	p := recreated.Partition
	waitFor(t, "the follower caught up with the leader's "+topicID, func() bool {
		for _, pi := range rm.Describe(recreated.Topic, &p).Partitions {
			return pi.TopicID == topicID && pi.LogEndOffset == leo
		}
		return false
	})
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
