package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// A topic deleted while one of its replicas is down, and created again, does
// not reuse that replica's stale log: the returning broker deletes it (its
// topic ID is not the controller's), the controller completes the deletion
// only then, and every replica of the new topic ends identical to its
// leader, with none of the old records (issue 10, paths 2 and 8).
func TestRecreatedTopicDoesNotReuseAStaleLog(t *testing.T) {
	c := newCtlCluster(t, 2*time.Second)
	c.createTopic("x", 1, 3)
	for i := range 10 {
		v := fmt.Sprintf("old-%d", i)
		testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("x", 0, v) })
	}
	p, err := c.partitionState("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	// A follower goes down; the topic is deleted meanwhile.
	victim := p.GetReplicas()[slices.IndexFunc(p.GetReplicas(), func(r int32) bool { return r != p.GetLeader() })]
	vb, _ := c.broker(victim)
	vb.Kill()
	c.waitFenced(victim)
	runCtlclient(t, nil, "", "--controller", c.ctlAddr, "delete-topic", "--topic", "x").want(t, 0)
	// The deletion waits for the replica that is down, and says so.
	testutil.Eventually(t, 30*time.Second, func() error {
		st, err := c.cluster()
		if err != nil {
			return err
		}
		pd := st.GetPendingDeletions()
		if len(pd) != 1 || pd[0].GetTopicId() != p.GetTopicId() || len(pd[0].GetPending()) != 1 ||
			!slices.Equal(pd[0].GetPending()[0].GetBrokers(), []int32{victim}) {
			return fmt.Errorf("pending deletions %v, want x-0 on broker %d only", pd, victim)
		}
		return nil
	})
	r := runCtlclient(t, nil, "", "--controller", c.ctlAddr, "describe-cluster").want(t, 0)
	if !strings.Contains(r.stdout, "pending deletions") || !strings.Contains(r.stdout, p.GetTopicId()) {
		t.Fatalf("describe-cluster does not show the pending deletion:\n%s", r.stdout)
	}

	// It comes back (and deletes its log of the old topic), and the topic
	// is created again.
	c.startBroker(victim)
	c.waitAlive(victim)
	testutil.Eventually(t, 30*time.Second, func() error {
		st, err := c.cluster()
		if err != nil {
			return err
		}
		if pd := st.GetPendingDeletions(); len(pd) != 0 {
			return fmt.Errorf("pending deletions %v after broker %d came back", pd, victim)
		}
		return nil
	})
	c.createTopic("x", 1, 3)
	var want []string
	for i := range 5 {
		v := fmt.Sprintf("new-%d", i)
		want = append(want, v)
		testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("x", 0, v) })
	}
	c.waitInIsr("x", 0, victim, 60*time.Second)

	// Every replica, made leader in turn, serves exactly the new records.
	for _, id := range clusterIDs {
		if p, _ := c.partitionState("x", 0); p.GetLeader() != id {
			runCtlclient(t, nil, "", "--controller", c.ctlAddr, "elect", "--topic", "x", "--partition", "0", "--leader", itoa(int(id))).want(t, 0)
		}
		_, cl := c.broker(id)
		testutil.Eventually(t, 30*time.Second, func() error {
			d, err := cl.partition("x", 0)
			if err != nil {
				return err
			}
			if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER || d.GetHighWatermark() < int64(len(want)) {
				return fmt.Errorf("broker %d: %v", id, d)
			}
			return nil
		})
		var got []string
		for _, r := range cl.consumeAll("x", 0) {
			got = append(got, string(r.GetValue()))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("broker %d serves %v, want %v", id, got, want)
		}
	}
	vb, _ = c.broker(victim)
	if n := strings.Count(vb.Stderr(), "truncating on diverging epoch"); n > 5 {
		t.Errorf("broker %d truncated on diverging epochs %d times", victim, n)
	}
}
