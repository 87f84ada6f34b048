package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// Issue 19, path 1, with real processes, as the issue tells it: RF 3,
// min.insync.replicas=3, leader 1. Followers 2 and 3 die one after the
// other (ISR [1], ELR [2 3]). The operator lowers min.insync.replicas to 1
// with ctlclient alter-config to restore writes, and 20 acks=all records
// are acknowledged by leader 1 alone. Leader 1 dies; broker 2 comes back
// first. It lacks the 20 records, so it must not be elected (before the
// fix it was, from the stale ELR, and broker 1 then truncated to its log);
// when broker 1 returns it leads, and every acknowledged record is there.
func TestLoweringMinIsrLosesNoAcknowledgedRecord(t *testing.T) {
	const session = 2 * time.Second
	c := newCtlCluster(t, session)
	ctl := func(args ...string) ctlResult {
		return runCtlclientEnv(t, nil, append([]string{"--controller", c.ctlAddr}, args...)...)
	}
	ctl("create-topic", "--topic", "orders", "--partitions", "1", "--replication-factor", "3",
		"--config", "min.insync.replicas=3").want(t, 0)
	p, err := c.partitionState("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLeader() != 1 {
		// The assignment rotates by topic; this test's first topic starts at broker 1.
		t.Fatalf("leader %d, want 1 (replicas %v)", p.GetLeader(), p.GetReplicas())
	}
	testutil.Eventually(t, 30*time.Second, func() error { // the followers join the new topic's ISR
		st, err := c.partitionState("orders", 0)
		if err != nil || len(st.GetIsr()) != 3 {
			return fmt.Errorf("ISR %v %v", st.GetIsr(), err)
		}
		return nil
	})
	kill := func(id int32) {
		t.Helper()
		b, _ := c.broker(id)
		b.Kill()
		c.waitFenced(id)
	}
	kill(2)
	kill(3)
	p, err = c.partitionState("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLeader() != 1 || !slices.Equal(p.GetIsr(), []int32{1}) || !slices.Equal(p.GetElr(), []int32{2, 3}) {
		t.Fatalf("after 2 and 3 died: %v, want leader 1, ISR [1], ELR [2 3]", p)
	}

	ctl("alter-config", "--topic", "orders", "--set", "min.insync.replicas=1").want(t, 0)
	var acked []string
	for i := range 20 {
		v := fmt.Sprintf("acked-%02d", i)
		testutil.Eventually(t, 30*time.Second, func() error { return c.produceTo(1, "orders", 0, v) })
		acked = append(acked, v)
	}

	kill(1)
	c.startBroker(2)
	c.waitAlive(2)
	// The controller decides at the registration; give a wrong election
	// time to show before looking.
	_, cl2 := c.broker(2)
	deadline := time.Now().Add(3 * session)
	for time.Now().Before(deadline) {
		st, err := c.partitionState("orders", 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.GetLeader() == 2 {
			d, _ := cl2.partition("orders", 0)
			t.Fatalf("broker 2, which lacks the %d records acknowledged under min.insync.replicas=1, was elected: %v (its log end offset %d)",
				len(acked), st, d.GetLogEndOffset())
		}
		time.Sleep(100 * time.Millisecond)
	}

	c.startBroker(1)
	np := c.waitNewLeader("orders", 0, -1, 30*time.Second)
	if np.GetLeader() != 1 {
		t.Fatalf("leader %d, want 1, the only replica with the acknowledged records", np.GetLeader())
	}
	_, cl1 := c.broker(1)
	testutil.Eventually(t, 30*time.Second, func() error {
		d, err := cl1.partition("orders", 0)
		if err != nil {
			return err
		}
		if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER || d.GetHighWatermark() < int64(len(acked)) {
			return fmt.Errorf("broker 1 is %v with HW %d", d.GetRole(), d.GetHighWatermark())
		}
		return nil
	})
	var got []string
	for _, r := range cl1.consumeAll("orders", 0) {
		got = append(got, string(r.GetValue()))
	}
	for _, v := range acked {
		if !slices.Contains(got, v) {
			t.Fatalf("acknowledged record %q lost: the log holds %v", v, got)
		}
	}
	// Broker 2 follows and catches up: it rejoins the ISR with them.
	c.waitInIsr("orders", 0, 2, 60*time.Second)
}
