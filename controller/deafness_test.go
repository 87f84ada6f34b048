package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/replicad/replicad/controller/store"
)

// stallingPartitionWrites stalls (stall moves the manual clock on) and
// fails the next UpdatePartitions once armed: an etcd write made while
// etcd elects a new leader.
type stallingPartitionWrites struct {
	store.Store
	armed atomic.Bool
	stall func()
}

func (s *stallingPartitionWrites) UpdatePartitions(ctx context.Context, u []store.PartitionUpdate) error {
	if s.armed.CompareAndSwap(true, false) {
		s.stall()
		return errors.New("etcdserver: leader changed")
	}
	return s.Store.UpdatePartitions(ctx, u)
}

// A fencing whose store write stalls longer than the session timeout keeps
// the controller from hearing anyone; the next check must not fence the
// live brokers for the controller's own deafness. (Chaos seed 4 in etcd
// mode: an etcd member partitioned while a broker died; the live brokers
// were fenced after the stalled write and a partition went leaderless.)
func TestStalledDecisionDoesNotFenceLiveBrokers(t *testing.T) {
	st := &stallingPartitionWrites{Store: store.NewMemory()}
	h := startCluster(t, 3, withStore(st))
	st.stall = func() { h.clk.Advance(2 * testSessionTimeout) }
	h.createTopic("t", 3, 3)
	st.armed.Store(true)
	h.expire(1, 3) // broker 2 is fenced; the move of its partitions stalls, then fails
	h.clk.Advance(h.c.sessionCheckInterval() + 1)
	h.c.expireSessions(context.Background()) // the retry, with no heartbeat heard since the stall
	resp, err := h.c.DescribeCluster(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.GetBrokers() {
		if want := b.GetId() != 2; b.GetAlive() != want {
			t.Errorf("broker %d alive %v after the stalled fencing of broker 2, want %v", b.GetId(), b.GetAlive(), want)
		}
	}
	for i := int32(0); i < 3; i++ {
		if p := h.part("t", i); p.Leader == 2 || p.Leader < 0 {
			t.Errorf("t-%d led by %d after broker 2's fencing was retried, want a live broker", i, p.Leader)
		}
	}
}
