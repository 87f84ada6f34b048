package integration

import (
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// endpoint is b's address as a Broker of the contract.
func endpoint(t *testing.T, id int32, b *testutil.Broker) *replicadv1.Broker {
	t.Helper()
	host, port, err := net.SplitHostPort(b.Addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return &replicadv1.Broker{Id: id, Host: host, Port: int32(p)}
}

// sendLeaderAndIsr sends one partition state with the live brokers and requires NONE.
func (c *client) sendLeaderAndIsr(controllerEpoch int32, st *replicadv1.PartitionState, live []*replicadv1.Broker) {
	c.t.Helper()
	st.ControllerEpoch = controllerEpoch
	resp, err := c.rm.LeaderAndIsr(ctx(c.t), &replicadv1.LeaderAndIsrRequest{ControllerEpoch: controllerEpoch,
		PartitionStates: []*replicadv1.PartitionState{st}, LiveLeaders: live})
	if err != nil || resp.GetPartitionErrors()[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		c.t.Fatalf("LeaderAndIsr: %v %v", resp, err)
	}
}

// TestReplicationAcksAllAndFailover ensures that with three real brokers an
// acks=-1 produce completes once the followers have fetched it, that the
// followers' logs reach the leader's LEO and HW, and that after the leader is
// killed a follower made leader at a higher epoch still holds every
// acknowledged record and takes new ones.
func TestReplicationAcksAllAndFailover(t *testing.T) {
	var (
		brokers = make([]*testutil.Broker, 4)
		clients = make([]*client, 4)
		live    []*replicadv1.Broker
	)
	for id := int32(1); id <= 3; id++ {
		brokers[id], clients[id] = startBroker(t, id, t.TempDir())
		live = append(live, endpoint(t, id, brokers[id]))
	}
	state := func(leader, epoch int32, isr ...int32) *replicadv1.PartitionState {
		return &replicadv1.PartitionState{Topic: "orders", Partition: 0, Leader: leader, LeaderEpoch: epoch,
			Isr: isr, Replicas: []int32{1, 2, 3}, IsNew: epoch == 1}
	}
	for id := int32(1); id <= 3; id++ {
		clients[id].sendLeaderAndIsr(1, state(1, 1, 1, 2, 3), live)
	}

	var acked []string
	for i := range 20 {
		values := []string{fmt.Sprintf("r%d-a", i), fmt.Sprintf("r%d-b", i)}
		base := clients[1].produce("orders", 0, -1, values...)
		if base != int64(len(acked)) {
			t.Fatalf("batch %d at %d, want %d", i, base, len(acked))
		}
		acked = append(acked, values...)
	}
	want := int64(len(acked))
	for id := int32(2); id <= 3; id++ {
		c := clients[id]
		testutil.Eventually(t, 10*time.Second, func() error {
			p, err := c.partition("orders", 0)
			if err != nil {
				return err
			}
			if p.GetLogEndOffset() != want || p.GetHighWatermark() != want {
				return fmt.Errorf("follower %d LEO %d HW %d, want %d", id, p.GetLogEndOffset(), p.GetHighWatermark(), want)
			}
			return nil
		})
	}

	brokers[1].Kill()
	for id := int32(2); id <= 3; id++ {
		clients[id].sendLeaderAndIsr(1, state(2, 2, 2, 3), live[1:])
	}
	acked = append(acked, "after-failover")
	if base := clients[2].produce("orders", 0, -1, "after-failover"); base != want {
		t.Fatalf("first produce on the new leader at %d, want %d", base, want)
	}
	recs := clients[2].consumeAll("orders", 0)
	if len(recs) != len(acked) {
		t.Fatalf("new leader holds %d records, want %d", len(recs), len(acked))
	}
	for i, r := range recs {
		if r.GetOffset() != int64(i) || string(r.GetValue()) != acked[i] {
			t.Fatalf("record %d: offset %d value %q, want %q", i, r.GetOffset(), r.GetValue(), acked[i])
		}
	}
}

// TestLeaderWithFollowersStopsPromptly ensures SIGTERM on a leader whose
// followers hold open Fetch streams ends those streams and exits 0 well
// within the 10 s graceful-stop bound, rather than waiting it out.
func TestLeaderWithFollowersStopsPromptly(t *testing.T) {
	leader, lc := startBroker(t, 1, t.TempDir())
	follower, fc := startBroker(t, 2, t.TempDir())
	live := []*replicadv1.Broker{endpoint(t, 1, leader), endpoint(t, 2, follower)}
	st := func() *replicadv1.PartitionState {
		return &replicadv1.PartitionState{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1,
			Isr: []int32{1, 2}, Replicas: []int32{1, 2}, IsNew: true}
	}
	lc.sendLeaderAndIsr(1, st(), live)
	fc.sendLeaderAndIsr(1, st(), live)
	// acks=-1 with ISR {1,2} completes only once the follower's stream is fetching.
	lc.produce("orders", 0, -1, "a")

	start := time.Now()
	if code := leader.Terminate(8 * time.Second); code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, leader.Stderr())
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("SIGTERM took %v with a follower streaming", took)
	}
}
