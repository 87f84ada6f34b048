package main

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicad/replicad/core"
)

// bootBroker is a switchBroker whose Metadata answers name leader (id)
// at epoch as orders-0's leader, and every broker of addrs.
type bootBroker struct {
	*switchBroker
	leader, epoch atomic.Int32
	addrs         map[int32]string // filled in once every broker listens
	addrsReady    atomic.Bool
}

func newBootBroker(leader, epoch int32) *bootBroker {
	b := &bootBroker{switchBroker: newSwitchBroker(), addrs: map[int32]string{}}
	b.leader.Store(leader)
	b.epoch.Store(epoch)
	b.view = func() core.MetadataView {
		v := core.MetadataView{BrokerID: 0, ControllerID: -1}
		if b.addrsReady.Load() {
			for id := int32(1); id <= int32(len(b.addrs)); id++ {
				host, port, _ := net.SplitHostPort(b.addrs[id])
				p, _ := strconv.Atoi(port)
				v.Brokers = append(v.Brokers, core.Broker{ID: id, Host: host, Port: int32(p)})
			}
		}
		v.Topics = []core.TopicMetadata{{Topic: "orders", Partitions: []core.PartitionMetadata{
			{Partition: 0, Leader: b.leader.Load(), LeaderEpoch: b.epoch.Load(), Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}}}}
		return v
	}
	return b
}

// startBootBrokers serves n bootBrokers (ids 1..n), each first naming
// broker 1 at epoch 1 the leader.
func startBootBrokers(t *testing.T, n int) ([]*bootBroker, []string) {
	t.Helper()
	var bs []*bootBroker
	var addrs []string
	for range n {
		b := newBootBroker(1, 1)
		bs = append(bs, b)
		addrs = append(addrs, startBroker(t, b))
	}
	for _, b := range bs {
		for i, a := range addrs {
			b.addrs[int32(i+1)] = a
		}
		b.addrsReady.Store(true)
	}
	return bs, addrs
}

// With --bootstrap, produce and consume find the leader in a broker's
// Metadata: a listed broker that is down is passed over, --broker is not
// used, and no controller is needed.
func TestBootstrapFindsLeaderThroughAnyLiveBroker(t *testing.T) {
	bs, addrs := startBootBrokers(t, 2)
	for _, b := range bs {
		b.leader.Store(2)
	}
	boot := deadAddr(t) + "," + addrs[0]
	r := ctl(t, deadAddr(t), "", "--bootstrap", boot, "produce", "--topic", "orders", "--partition", "0", "--value", "x", "--value", "y")
	wantCode(t, r, 0)
	if n := bs[1].records("orders", 0); n != 2 || bs[0].records("orders", 0) != 0 {
		t.Fatalf("leader (broker 2) holds %d records, broker 1 %d; want 2 and 0", n, bs[0].records("orders", 0))
	}
	if bs[0].metadataCalls.Load() != 1 || bs[1].metadataCalls.Load() != 0 {
		t.Fatalf("Metadata asked of broker 1 %d times, broker 2 %d; want once, of broker 1 (the live bootstrap one)",
			bs[0].metadataCalls.Load(), bs[1].metadataCalls.Load())
	}
	r = ctl(t, deadAddr(t), "", "--bootstrap", boot, "consume", "--topic", "orders", "--partition", "0")
	wantCode(t, r, 0)
	if r.stdout != "0\tx\n1\ty\n" {
		t.Fatalf("consume stdout %q, want both records", r.stdout)
	}
	// --bootstrap wins over --controller (a dead one here) for finding leaders.
	r = ctl(t, deadAddr(t), "", "--controller", deadAddr(t), "--bootstrap", addrs[1], "produce", "--topic", "orders", "--partition", "0", "--value", "z")
	wantCode(t, r, 0)
	if n := bs[1].records("orders", 0); n != 3 {
		t.Fatalf("leader holds %d records, want 3", n)
	}
}

// A leader that answers NOT_LEADER_OR_FOLLOWER makes the client ask again,
// starting at the next broker; an answer naming the same leader at the same
// epoch is behind and passed over for one that knows the new leader.
func TestBootstrapRefreshesAStaleView(t *testing.T) {
	bs, addrs := startBootBrokers(t, 3)
	// Broker 1 was the leader; 1 and 2 have not heard yet that 3 leads now.
	bs[0].deposed.Store(true)
	bs[2].leader.Store(3)
	bs[2].epoch.Store(2)
	r := ctl(t, deadAddr(t), "", "--bootstrap", addrs[0]+","+addrs[1]+","+addrs[2], "produce", "--topic", "orders", "--partition", "0", "--value", "x")
	wantCode(t, r, 0)
	if bs[0].refused.Load() != 1 || bs[2].records("orders", 0) != 1 {
		t.Fatalf("broker 1 refused %d, broker 3 holds %d; want 1 and 1", bs[0].refused.Load(), bs[2].records("orders", 0))
	}
	for i, want := range []int32{1, 1, 1} { // 1 first; then 2 (behind, passed over) and 3
		if got := bs[i].metadataCalls.Load(); got != want {
			t.Fatalf("broker %d asked %d times for Metadata, want %d", i+1, got, want)
		}
	}
}

// When every broker keeps naming a leader that refuses, retrying stops
// after maxLeaderAttempts attempts (and --timeout) with the last answer.
func TestBootstrapRetriesAreBounded(t *testing.T) {
	old := maxLeaderAttempts
	maxLeaderAttempts = 3
	t.Cleanup(func() { maxLeaderAttempts = old })
	bs, addrs := startBootBrokers(t, 2)
	bs[0].deposed.Store(true)
	start := time.Now()
	r := ctl(t, "", "", "--bootstrap", addrs[0]+","+addrs[1], "--timeout", "30s", "produce", "--topic", "orders", "--partition", "0", "--value", "x")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "produce orders-0: NOT_LEADER_OR_FOLLOWER")
	if n := bs[0].refused.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3 (maxLeaderAttempts)", n)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("gave up after %s, want about 300ms of backoff", el)
	}
}

// A topic the caller may not describe fails at once; one no broker knows
// is retried (a topic just created) and named in the error after --timeout;
// --bootstrap without an address is a usage error.
func TestBootstrapLookupErrors(t *testing.T) {
	b := newSwitchBroker()
	b.view = func() core.MetadataView {
		return core.MetadataView{Topics: []core.TopicMetadata{{Topic: "secret", Error: core.ErrorCode(29)}}}
	}
	addr := startBroker(t, b)
	r := ctl(t, "", "", "--bootstrap", addr, "--timeout", "20s", "produce", "--topic", "secret", "--partition", "0", "--value", "x")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "secret-0: TOPIC_AUTHORIZATION_FAILED")
	if n := b.metadataCalls.Load(); n != 1 {
		t.Fatalf("%d Metadata calls, want 1 (no retry)", n)
	}
	r = ctl(t, "", "", "--bootstrap", addr, "--timeout", "400ms", "produce", "--topic", "nope", "--partition", "0", "--value", "x")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "nope-0: UNKNOWN_TOPIC_OR_PARTITION")
	if n := b.metadataCalls.Load(); n < 3 {
		t.Fatalf("%d Metadata calls in all, want retries of the unknown topic", n)
	}
	for _, bad := range []string{",", "host-without-port"} {
		r = ctl(t, "", "", "--bootstrap", bad, "produce", "--topic", "orders", "--partition", "0", "--value", "x")
		wantCode(t, r, 2)
		wantContains(t, "stderr", r.stderr, "--bootstrap")
	}
}
