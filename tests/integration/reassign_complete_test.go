package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// A reassignment whose completion is due when no target replica may lead
// completes once one may, with no ISR change to set it off, and `reassign
// --verify` then passes (issue 19, path 4: before,
// completion was tried only right after an ISR change, and this one stayed
// in progress for good).
//
// min ISR 2, RF 3, leader 1. Brokers 3 then 2 die: the ISR is [1], 2 is an
// eligible leader replica (ELR). The plan shrinks the partition to [2 3]:
// nothing to add, so it is due at once, but neither 2 nor 3 is alive. Then
// 1 dies too and 2 comes back: it is elected from the ELR, and nothing
// changes the ISR any more (3 stays down).
func TestReassignmentCompletesWhenATargetCanLeadLater(t *testing.T) {
	const session = 2 * time.Second
	c := newCtlCluster(t, session, "--min-insync-replicas", "2")
	c.createTopic("m", 1, 3)
	p, err := c.partitionState("m", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLeader() != 1 {
		// The assignment rotates by topic; this test's first topic starts at broker 1.
		t.Fatalf("leader %d, want 1 (replicas %v)", p.GetLeader(), p.GetReplicas())
	}
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceTo(1, "m", 0, "acked") })
	kill := func(id int32) {
		t.Helper()
		b, _ := c.broker(id)
		b.Kill()
		c.waitFenced(id)
	}
	kill(3)
	kill(2)
	if p, _ := c.partitionState("m", 0); !slices.Equal(p.GetIsr(), []int32{1}) || !slices.Equal(p.GetElr(), []int32{2}) {
		t.Fatalf("after 3 and 2 went: %v, want ISR [1], ELR [2]", p)
	}

	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(`{"version":1,"partitions":[{"topic":"m","partition":0,"replicas":[2,3]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// A plan keeps the replication factor; the one-partition form may
	// change it.
	runCtlclient(t, nil, "", "--controller", c.ctlAddr, "reassign", "--topic", "m", "--partition", "0", "--replicas", "2,3", "--no-wait").want(t, 0)
	r := runCtlclient(t, nil, "", "--controller", c.ctlAddr, "reassign", "--verify", "--plan", planFile).want(t, 1)
	wantIn(t, r.stdout, "m-0: in progress")

	kill(1)
	c.startBroker(2) // killed in the same boot: it lost nothing, and leads from the ELR
	if np := c.waitNewLeader("m", 0, -1, 30*time.Second); np.GetLeader() != 2 {
		t.Fatalf("leader %d, want 2 (the ELR member)", np.GetLeader())
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		p, err := c.partitionState("m", 0)
		if err != nil {
			return err
		}
		if !slices.Equal(p.GetReplicas(), []int32{2, 3}) || len(p.GetAddingReplicas())+len(p.GetRemovingReplicas()) != 0 {
			return fmt.Errorf("partition %v, want the reassignment to [2 3] completed", p)
		}
		return nil
	})
	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "reassign", "--verify", "--plan", planFile).want(t, 0)
	wantIn(t, r.stdout, "m-0: complete", "Replication throttle removed.")
	// Broker 3 back: the ISR reaches min ISR again, the HW moves, and the
	// acknowledged record is served.
	c.startBroker(3)
	c.waitInIsr("m", 0, 3, 60*time.Second)
	_, leader := c.broker(2)
	testutil.Eventually(t, 30*time.Second, func() error {
		var got []string
		for _, rec := range leader.consumeAll("m", 0) {
			got = append(got, string(rec.GetValue()))
		}
		if !slices.Equal(got, []string{"acked"}) {
			return fmt.Errorf("leader 2 serves %v, want the acknowledged record", got)
		}
		return nil
	})
}
