package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// cluster is three replicad processes, each with its own log dir that
// survives restarts, replicating one partition whose state the test drives by
// hand (the test is the controller).
type cluster struct {
	t         *testing.T
	topic     string
	partition int32
	args      map[int32][]string // extra flags per broker
	dirs      map[int32]string
	brokers   map[int32]*testutil.Broker
	clients   map[int32]*client
}

// clusterIDs are the brokers of every cluster, and the partition's replicas.
var clusterIDs = []int32{1, 2, 3}

// newCluster starts brokers 1..3; args are the extra flags of every broker.
func newCluster(t *testing.T, topic string, args ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, topic: topic, args: map[int32][]string{}, dirs: map[int32]string{},
		brokers: map[int32]*testutil.Broker{}, clients: map[int32]*client{}}
	for _, id := range clusterIDs {
		c.args[id] = args
		c.dirs[id] = t.TempDir()
		c.start(id)
	}
	return c
}

// start (re)starts broker id on its log dir; its address is new.
func (c *cluster) start(id int32) {
	c.t.Helper()
	b := testutil.StartBroker(c.t, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: []string{c.dirs[id]}, Args: c.args[id]})
	c.brokers[id], c.clients[id] = b, newClient(c.t, b.Dial(c.t))
}

// kill SIGKILLs broker id: nothing is flushed or checkpointed.
func (c *cluster) kill(id int32) {
	c.brokers[id].Kill()
}

func (c *cluster) running(id int32) bool {
	b, ok := c.brokers[id]
	return ok && b.Running()
}

// live lists the endpoints of the running brokers (LeaderAndIsr's live_leaders).
func (c *cluster) live() []*replicadv1.Broker {
	var out []*replicadv1.Broker
	for _, id := range clusterIDs {
		if c.running(id) {
			out = append(out, endpoint(c.t, id, c.brokers[id]))
		}
	}
	return out
}

// state is the partition's state with replicas 1..3.
func (c *cluster) state(leader, leaderEpoch int32, isr ...int32) *replicadv1.PartitionState {
	return &replicadv1.PartitionState{Topic: c.topic, Partition: c.partition, Leader: leader, LeaderEpoch: leaderEpoch,
		Isr: slices.Clone(isr), Replicas: slices.Clone(clusterIDs), IsNew: leaderEpoch == 1}
}

// leaderAndIsr sends the state to each of ids with the live brokers' endpoints.
func (c *cluster) leaderAndIsr(ids []int32, leader, leaderEpoch int32, isr ...int32) {
	c.t.Helper()
	live := c.live()
	for _, id := range ids {
		c.clients[id].sendLeaderAndIsr(1, c.state(leader, leaderEpoch, isr...), live)
	}
}

// describe is broker id's view of the partition.
func (c *cluster) describe(id int32) *replicadv1.PartitionDescription {
	c.t.Helper()
	p, err := c.clients[id].partition(c.topic, c.partition)
	if err != nil {
		c.t.Fatalf("broker %d: %v", id, err)
	}
	return p
}

// produce sends values as one batch to broker id and returns the answer
// without judging it.
func (c *cluster) produce(id, acks int32, timeout time.Duration, values ...string) (*replicadv1.ProduceResponse, error) {
	req := &replicadv1.ProduceRequest{Topic: c.topic, Partition: c.partition, Acks: acks, TimeoutMs: int32(timeout / time.Millisecond)}
	for _, v := range values {
		req.Records = append(req.Records, &replicadv1.Record{Value: []byte(v)})
	}
	return c.clients[id].log.Produce(ctx(c.t), req)
}

// waitIsr waits until leader reports exactly isr (sorted) and returns its description.
func (c *cluster) waitIsr(leader int32, timeout time.Duration, isr ...int32) *replicadv1.PartitionDescription {
	c.t.Helper()
	var last *replicadv1.PartitionDescription
	testutil.Eventually(c.t, timeout, func() error {
		p, err := c.clients[leader].partition(c.topic, c.partition)
		if err != nil {
			return err
		}
		last = p
		if !slices.Equal(p.GetIsr(), isr) {
			return fmt.Errorf("leader %d ISR %v (partition epoch %d), want %v", leader, p.GetIsr(), p.GetPartitionEpoch(), isr)
		}
		return nil
	})
	return last
}

// waitCaughtUp waits until follower holds the leader's LEO and HW, with no
// produce in flight, and returns them.
func (c *cluster) waitCaughtUp(leader, follower int32, timeout time.Duration) (leo, hw int64) {
	c.t.Helper()
	testutil.Eventually(c.t, timeout, func() error {
		l, err := c.clients[leader].partition(c.topic, c.partition)
		if err != nil {
			return err
		}
		f, err := c.clients[follower].partition(c.topic, c.partition)
		if err != nil {
			return err
		}
		if f.GetLogEndOffset() != l.GetLogEndOffset() || f.GetHighWatermark() != l.GetHighWatermark() || l.GetHighWatermark() != l.GetLogEndOffset() {
			return fmt.Errorf("leader %d LEO %d HW %d, follower %d LEO %d HW %d", leader, l.GetLogEndOffset(), l.GetHighWatermark(),
				follower, f.GetLogEndOffset(), f.GetHighWatermark())
		}
		leo, hw = l.GetLogEndOffset(), l.GetHighWatermark()
		return nil
	})
	return leo, hw
}

// records is what a leader's Consume returns from offset 0 to its HW, as
// offset -> value.
func (c *cluster) records(leader int32) []string {
	c.t.Helper()
	var out []string
	for _, r := range c.clients[leader].consumeAll(c.topic, c.partition) {
		if r.GetOffset() != int64(len(out)) {
			c.t.Fatalf("broker %d: record at offset %d after %d records", leader, r.GetOffset(), len(out))
		}
		out = append(out, string(r.GetValue()))
	}
	return out
}
