package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// wantSnapshot compares the cluster-wide figures of got with want (Brokers
// are checked by the callers).
func wantSnapshot(t *testing.T, step string, got, want MetricsSnapshot) {
	t.Helper()
	got.Brokers, want.Brokers = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: snapshot\n got %+v\nwant %+v", step, got, want)
	}
}

// wantBroker checks one broker's figures (its QueueDepth aside).
func wantBroker(t *testing.T, step string, s MetricsSnapshot, want BrokerMetrics) {
	t.Helper()
	for _, b := range s.Brokers {
		if b.ID == want.ID {
			b.QueueDepth, want.QueueDepth = 0, 0
			if b != want {
				t.Errorf("%s: broker %d\n got %+v\nwant %+v", step, want.ID, b, want)
			}
			return
		}
	}
	t.Errorf("%s: no broker %d in %+v", step, want.ID, s.Brokers)
}

// TestMetricsSnapshotFollowsFencing walks a 3-broker cluster with
// min.insync.replicas 2 down one broker at a time and checks every figure
// of the snapshot: fenced brokers, under-replicated, under-min-ISR,
// leaderless and offline partitions, the preferred-leader imbalance, and
// the counts of committed states and leader changes.
func TestMetricsSnapshotFollowsFencing(t *testing.T) {
	h := newHarness(t)
	if s := h.c.MetricsSnapshot(); s.Active || s.Epoch != 0 || s.BrokersRegistered != 0 {
		t.Fatalf("before Run: %+v, want inactive at epoch 0 with nothing", s)
	}
	h.minIsr = 2
	h.start()
	for id := int32(1); id <= 3; id++ {
		h.register(id)
	}
	h.createTopic("t", 3, 3) // p0 [1 2 3], p1 [2 3 1], p2 [3 1 2]
	_, epoch := h.c.Active()
	s := h.c.MetricsSnapshot()
	wantSnapshot(t, "created", s, MetricsSnapshot{Active: true, Epoch: epoch, BrokersRegistered: 3, Partitions: 3,
		PartitionStateChanges: 3})
	for id := int32(1); id <= 3; id++ {
		wantBroker(t, "created", s, BrokerMetrics{ID: id, Leaders: 1, Preferred: 1})
	}
	waitFor(t, "every broker queue to drain", func() bool {
		for _, b := range h.c.MetricsSnapshot().Brokers {
			if b.QueueDepth != 0 {
				return false
			}
		}
		return true
	})

	h.expire(1, 2) // 3 fenced: p2 to 1; every ISR loses 3 (2 left: min ISR holds)
	s = h.c.MetricsSnapshot()
	wantSnapshot(t, "3 fenced", s, MetricsSnapshot{Active: true, Epoch: epoch, BrokersRegistered: 3, BrokersFenced: 1,
		Partitions: 3, UnderReplicated: 3, PreferredImbalance: 1, PartitionStateChanges: 6, LeaderChanges: 1})
	wantBroker(t, "3 fenced", s, BrokerMetrics{ID: 1, Leaders: 2, Preferred: 1})
	wantBroker(t, "3 fenced", s, BrokerMetrics{ID: 3, Fenced: true, Preferred: 1, PreferredNotLed: 1})

	h.expire(1) // 2 fenced: p1 to 1; every ISR is [1], under min ISR
	s = h.c.MetricsSnapshot()
	wantSnapshot(t, "2 fenced", s, MetricsSnapshot{Active: true, Epoch: epoch, BrokersRegistered: 3, BrokersFenced: 2,
		Partitions: 3, UnderReplicated: 3, UnderMinIsr: 3, PreferredImbalance: 2, PartitionStateChanges: 9, LeaderChanges: 2})
	wantBroker(t, "2 fenced", s, BrokerMetrics{ID: 1, Leaders: 3, Preferred: 1})
	wantBroker(t, "2 fenced", s, BrokerMetrics{ID: 2, Fenced: true, Preferred: 1, PreferredNotLed: 1})

	h.expire() // 1 fenced: nobody may lead
	s = h.c.MetricsSnapshot()
	wantSnapshot(t, "all fenced", s, MetricsSnapshot{Active: true, Epoch: epoch, BrokersRegistered: 3, BrokersFenced: 3,
		Partitions: 3, Offline: 3, Leaderless: 3, UnderReplicated: 3, UnderMinIsr: 3, PreferredImbalance: 3,
		PartitionStateChanges: 12, LeaderChanges: 5})

	// A returning broker leads again: the partition is online, the counts go on.
	h.register(1)
	s = h.c.MetricsSnapshot()
	if s.Offline != 0 || s.Leaderless != 0 || s.BrokersFenced != 2 || s.LeaderChanges != 8 {
		t.Errorf("broker 1 back: %+v, want no offline or leaderless partition, 2 fenced brokers, 8 leader changes", s)
	}

	// Stopped (a standby): the cluster figures are the active one's to give;
	// the epoch of the last term and the counters stay.
	h.stop()
	s = h.c.MetricsSnapshot()
	wantSnapshot(t, "stopped", s, MetricsSnapshot{Epoch: epoch, PartitionStateChanges: s.PartitionStateChanges, LeaderChanges: 8})
	if s.PartitionStateChanges < 15 || len(s.Brokers) != 0 {
		t.Errorf("stopped: %+v, want at least 15 state changes kept and no brokers", s)
	}
}

// gatedClient holds every LeaderAndIsr until its gate closes.
type gatedClient struct {
	replicadv1.ReplicaManagerServiceClient
	gate <-chan struct{}
}

func (g gatedClient) LeaderAndIsr(ctx context.Context, in *replicadv1.LeaderAndIsrRequest, opts ...grpc.CallOption) (*replicadv1.LeaderAndIsrResponse, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.ReplicaManagerServiceClient.LeaderAndIsr(ctx, in, opts...)
}

// TestMetricsSnapshotQueueDepth: a broker that does not answer its
// LeaderAndIsr has the partitions of it waiting in its queue, and none once
// it answers; the others' queues drain meanwhile.
func TestMetricsSnapshotQueueDepth(t *testing.T) {
	gate := make(chan struct{})
	slow := brokerHost(2)
	h := newHarness(t, func(c *Config) {
		inner := c.DialBroker
		c.DialBroker = func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
			cl, closer, err := inner(addr)
			if err == nil && strings.HasPrefix(addr, slow+":") {
				cl = gatedClient{cl, gate}
			}
			return cl, closer, err
		}
	})
	h.start()
	for id := int32(1); id <= 3; id++ {
		h.register(id)
	}
	created := make(chan struct{})
	go func() {
		defer close(created)
		_, _ = h.c.CreateTopic(context.Background(), &replicadv1.CreateTopicRequest{Topic: "t", Partitions: 4, ReplicationFactor: 3})
	}()
	depth := func(id int32) int {
		for _, b := range h.c.MetricsSnapshot().Brokers {
			if b.ID == id {
				return b.QueueDepth
			}
		}
		return -1
	}
	waitFor(t, "broker 2's queue to hold the 4 partitions of its LeaderAndIsr", func() bool { return depth(2) >= 4 })
	waitFor(t, "broker 1's and 3's queues to drain", func() bool { return depth(1) == 0 && depth(3) == 0 })
	close(gate)
	waitFor(t, "broker 2's queue to drain once it answers", func() bool { return depth(2) == 0 })
	<-created
}

// BenchmarkMetricsSnapshot10000 is one scrape's hold of the controller's
// lock with 10,000 partitions of RF 3 on 5 brokers (README, Monitoring).
func BenchmarkMetricsSnapshot10000(b *testing.B) {
	c, err := New(Config{Store: store.NewMemory(), DialBroker: func(string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
		return nil, nil, errors.New("not dialed")
	}})
	if err != nil {
		b.Fatal(err)
	}
	c.active, c.epoch = true, 1
	c.brokers = map[int32]*brokerState{}
	for id := int32(1); id <= 5; id++ {
		c.brokers[id] = &brokerState{info: store.Broker{ID: id, MinInsyncReplicas: 2}}
	}
	c.parts = map[partitionKey]store.Partition{}
	for i := range 10000 {
		rs := []int32{int32(i%5 + 1), int32((i+1)%5 + 1), int32((i+2)%5 + 1)}
		p := store.Partition{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100), Leader: rs[i%2], ISR: rs[:2+i%2], Replicas: rs}
		c.parts[keyOf(p)] = p
	}
	b.ReportAllocs()
	for b.Loop() {
		if s := c.MetricsSnapshot(); s.Partitions != 10000 {
			b.Fatal(s.Partitions)
		}
	}
}
