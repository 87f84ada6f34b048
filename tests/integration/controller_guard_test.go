package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// A hand-made LeaderAndIsr with a controller epoch no controller holds
// cannot split the brain of a cluster with a controller (issue 10, path 7):
// the broker, registered with the controller, refuses it with a message that
// says why and changes nothing; an election through the controller then
// moves leadership as usual, only one broker takes writes, and the
// controller's epoch does not churn.
func TestHandMadeHigherControllerEpochIsRefused(t *testing.T) {
	c := newCtlCluster(t, 2*time.Second)
	c.createTopic("x", 1, 3)
	p, err := c.partitionState("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := p.GetLeader()
	other := p.GetReplicas()[slices.IndexFunc(p.GetReplicas(), func(r int32) bool { return r != leader })]
	before, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	lb, lcl := c.broker(leader)

	r := ctlclient(t, lb.Addr, "", "leader-and-isr", "--controller-id", "0", "--controller-epoch", "100",
		"--topic", "x", "--partition", "0", "--leader", itoa(int(leader)), "--leader-epoch", "50",
		"--isr", "1,2,3", "--replicas", "1,2,3")
	if r.code == 0 {
		t.Fatalf("a hand-made LeaderAndIsr at controller epoch 100 was accepted:\n%s", r.stdout)
	}
	if out := r.stdout + r.stderr; !strings.Contains(out, "NOT_CONTROLLER") || !strings.Contains(out, "controller epoch 100") {
		t.Fatalf("refusal does not say why:\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	d, err := lcl.partition("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if d.GetLeaderEpoch() == 50 || d.GetControllerEpoch() == 100 || lcl.describe().GetControllerEpoch() == 100 {
		t.Fatalf("the refused request changed the broker: %v", d)
	}

	runCtlclient(t, nil, "", "--controller", c.ctlAddr, "elect", "--topic", "x", "--partition", "0", "--leader", itoa(int(other))).want(t, 0)
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceTo(other, "x", 0, "after-elect") })
	if err := c.produceTo(leader, "x", 0, "to-the-old-leader"); err == nil {
		t.Fatalf("the old leader %d still takes acks=all writes after the election: two leaders", leader)
	}
	after, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	if after.GetControllerEpoch() != before.GetControllerEpoch() {
		t.Fatalf("controller epoch moved from %d to %d", before.GetControllerEpoch(), after.GetControllerEpoch())
	}
	for _, id := range clusterIDs {
		_, cl := c.broker(id)
		if e := cl.describe().GetControllerEpoch(); e != before.GetControllerEpoch() {
			t.Errorf("broker %d at controller epoch %d, want the controller's %d", id, e, before.GetControllerEpoch())
		}
	}
}
