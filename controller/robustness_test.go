package controller

import (
	"context"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// A RegisterBroker retried with the same incarnation id (its answer was
// lost) gets the same broker epoch and fences nothing; a new incarnation
// gets a new epoch and the old one's leadership moves.
func TestRegistrationRetryWithSameIncarnation(t *testing.T) {
	h := startCluster(t, 3)
	register := func(incarnation string) int64 {
		t.Helper()
		resp, err := h.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{
			BrokerId: 1, Host: brokerHost(1), Port: brokerPort(1), IncarnationId: incarnation})
		if err != nil || resp.GetErrorCode() != codeNone {
			t.Fatalf("RegisterBroker: %v %v", resp, err)
		}
		return resp.GetBrokerEpoch()
	}
	first := register("run-a")
	h.createTopic("t", 1, 3) // broker 1 leads t-0
	p := h.part("t", 0)
	if p.Leader != 1 {
		t.Fatalf("t-0 led by %d, want 1", p.Leader)
	}
	if again := register("run-a"); again != first {
		t.Fatalf("retried registration got epoch %d, first %d", again, first)
	}
	if q := h.part("t", 0); q.LeaderEpoch != p.LeaderEpoch || q.Leader != p.Leader {
		t.Fatalf("a retried registration changed t-0: %+v -> %+v", p, q)
	}
	if next := register("run-b"); next <= first {
		t.Fatalf("new incarnation got epoch %d, not above %d", next, first)
	}
	if q := h.part("t", 0); q.LeaderEpoch != p.LeaderEpoch+1 {
		t.Fatalf("a new incarnation left t-0 at leader epoch %d (was %d)", q.LeaderEpoch, p.LeaderEpoch)
	}
}

// Two brokers silent together are fenced together: no partition is handed
// to one of them on the way, and each partition's epochs rise only once.
func TestSimultaneousSilenceFencedTogether(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 3, 3)
	before := map[int32]int32{}
	for i := int32(0); i < 3; i++ {
		before[i] = h.part("t", i).LeaderEpoch
	}
	h.expire(3)
	for i := int32(0); i < 3; i++ {
		p := h.part("t", i)
		if p.Leader != 3 {
			t.Errorf("t-%d led by %d, want the only live broker 3", i, p.Leader)
		}
		if p.LeaderEpoch != before[i]+1 {
			t.Errorf("t-%d leader epoch %d, want exactly one bump from %d", i, p.LeaderEpoch, before[i])
		}
	}
}

// A controller that stood still (paused process) restarts every live
// broker's session instead of fencing brokers whose silence was its own.
func TestControllerPauseExtendsSessions(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 1, 3)
	h.clk.Advance(2 * testSessionTimeout)
	h.c.extendSessions(2 * testSessionTimeout)
	h.c.expireSessions(context.Background())
	resp, err := h.c.DescribeCluster(context.Background(), &replicadv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.GetBrokers() {
		if !b.GetAlive() {
			t.Fatalf("broker %d fenced after a controller pause", b.GetId())
		}
	}
	// Without the extension the same silence fences.
	h.clk.Advance(testSessionTimeout + time.Millisecond)
	h.c.expireSessions(context.Background())
	resp, _ = h.c.DescribeCluster(context.Background(), &replicadv1.DescribeClusterRequest{})
	for _, b := range resp.GetBrokers() {
		if b.GetAlive() {
			t.Fatalf("broker %d still alive after a real session timeout", b.GetId())
		}
	}
}
