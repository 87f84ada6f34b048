package controller

import (
	"context"
	"testing"
	"time"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// A RegisterBroker retried with the same incarnation id (its answer was
// lost) gets the same broker epoch and fences nothing; a new incarnation
// on the old one's dirs gets a new epoch and the old one's leadership moves.
func TestRegistrationRetryWithSameIncarnation(t *testing.T) {
	h := startCluster(t, 3)
	previous := h.epoch[1] // run-a follows the harness's broker 1 on its dirs
	register := func(incarnation string) int64 {
		t.Helper()
		resp, err := h.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{
			BrokerId: 1, Host: brokerHost(1), Port: brokerPort(1), IncarnationId: incarnation, PreviousBrokerEpoch: previous})
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
	// run-b is the process restarted on run-a's dirs (they name run-a's
	// epoch): run-a has exited, and run-b replaces it at once.
	previous = first
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

// A second process registering a broker id whose incarnation is alive is
// refused with DUPLICATE_BROKER_REGISTRATION, and nothing is fenced: the
// live one keeps its epoch and leaderships. Once the live one has been
// silent for half a session timeout (it died), the same registration is
// accepted, before its session would expire. A process that restarted on
// the live one's dirs (it names the live epoch as its previous one) is
// accepted at once: the dirs' lock proves the old process gone (issue 19,
// path 13).
func TestDuplicateRegistrationOfALiveBrokerIsRefused(t *testing.T) {
	h := startCluster(t, 3)
	reg := func(incarnation string, previous int64) *replicadv1.RegisterBrokerResponse {
		t.Helper()
		resp, err := h.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{
			BrokerId: 2, Host: brokerHost(2), Port: brokerPort(2) + 100, IncarnationId: incarnation, PreviousBrokerEpoch: previous})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := reg("first", h.epoch[2])
	if first.GetErrorCode() != codeNone {
		t.Fatalf("first process: %v", first)
	}
	h.epoch[2] = first.GetBrokerEpoch()
	h.createTopic("t", 3, 3)
	before := map[int32]store.Partition{}
	for i := range int32(3) {
		before[i] = h.part("t", i)
	}
	for range 3 {
		if r := reg("second", -1); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION {
			t.Fatalf("second process while the first lives: %v, want DUPLICATE_BROKER_REGISTRATION", r)
		}
		h.clk.Advance(testSessionTimeout / 3)
		h.heartbeat(1, 2, 3)
	}
	for i := range int32(3) {
		if p := h.part("t", i); p.LeaderEpoch != before[i].LeaderEpoch || p.Leader != before[i].Leader || p.PartitionEpoch != before[i].PartitionEpoch {
			t.Fatalf("t-%d changed under refused registrations: %+v -> %+v", i, before[i], p)
		}
	}

	// The first dies (no more heartbeats): after half a session timeout
	// the second gets in, before the first's session expires.
	h.clk.Advance(testSessionTimeout/2 + time.Millisecond)
	h.heartbeat(1, 3)
	second := reg("second", -1)
	if second.GetErrorCode() != codeNone || second.GetBrokerEpoch() <= h.epoch[2] {
		t.Fatalf("second process after the first went silent: %v", second)
	}

	// A restart on the dirs of the live incarnation is accepted at once.
	third := reg("third", second.GetBrokerEpoch())
	if third.GetErrorCode() != codeNone || third.GetBrokerEpoch() <= second.GetBrokerEpoch() {
		t.Fatalf("restart on the live incarnation's dirs: %v", third)
	}
}
