package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// A controller process stopped (SIGSTOP) for twice the session timeout and
// then continued must not take its own absence for its brokers': on
// resuming its first session check ran before it read the heartbeats
// queued in its sockets, and fenced brokers [1,2,3] in one decision, every
// partition leaderless (issue 19 path 11, found by make chaos's
// pause-controller fault). Every broker stays alive at the same broker
// epoch, and every partition keeps its leader at the same leader epoch.
func TestControllerPauseFencesNoBroker(t *testing.T) {
	const session = 2 * time.Second
	c := newCtlCluster(t, session)
	c.createTopic("events", 3, 3)
	// Settled first (every ISR full): the controller has run session
	// checks for a while, as in the chaos run that found it.
	var before *replicadv1.DescribeClusterResponse
	testutil.Eventually(t, 30*time.Second, func() (err error) {
		if before, err = c.cluster(); err != nil {
			return err
		}
		for _, p := range before.GetPartitions() {
			if len(p.GetIsr()) != 3 {
				return fmt.Errorf("%s-%d ISR %v", p.GetTopic(), p.GetPartition(), p.GetIsr())
			}
		}
		return nil
	})
	c.ctl.Signal(syscall.SIGSTOP)
	time.Sleep(2 * session) // the fault itself: the controller stands still this long
	c.ctl.Signal(syscall.SIGCONT)
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(c.ctl.Stderr(), "the controller was paused") {
			return fmt.Errorf("the controller has not noticed its pause yet")
		}
		return nil
	})
	// Through a further session timeout and a half of checks, nothing is
	// fenced and nobody loses a leadership.
	deadline := time.Now().Add(session + session/2)
	for time.Now().Before(deadline) {
		after, err := c.cluster()
		if err != nil {
			t.Fatal(err)
		}
		compareAfterPause(t, before, after)
		if t.Failed() {
			t.Fatalf("after the controller's pause:\n%s", c.ctl.Stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if strings.Contains(c.ctl.Stderr(), "broker fenced") {
		t.Fatalf("the controller fenced a broker after its pause:\n%s", c.ctl.Stderr())
	}
}

// compareAfterPause fails t where after has a broker fenced or at another
// epoch, or a partition with another leader or leader epoch, than before.
func compareAfterPause(t *testing.T, before, after *replicadv1.DescribeClusterResponse) {
	t.Helper()
	epochs := map[int32]int64{}
	for _, b := range before.GetBrokers() {
		epochs[b.GetId()] = b.GetBrokerEpoch()
	}
	for _, b := range after.GetBrokers() {
		if !b.GetAlive() || b.GetBrokerEpoch() != epochs[b.GetId()] {
			t.Errorf("broker %d alive=%v at broker epoch %d (was %d)", b.GetId(), b.GetAlive(), b.GetBrokerEpoch(), epochs[b.GetId()])
		}
	}
	for i, p := range after.GetPartitions() {
		q := before.GetPartitions()[i]
		if p.GetLeader() != q.GetLeader() || p.GetLeaderEpoch() != q.GetLeaderEpoch() {
			t.Errorf("%s-%d led by %d at leader epoch %d, was %d at %d", p.GetTopic(), p.GetPartition(),
				p.GetLeader(), p.GetLeaderEpoch(), q.GetLeader(), q.GetLeaderEpoch())
		}
	}
}
