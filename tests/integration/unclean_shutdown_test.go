package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/replicad/replicad/core/logmgr"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// The last ISR member of a partition comes back from a power loss that took
// its unflushed tail: it is not elected while a replica holding every
// acknowledged record may still come back, and when that one does, nothing
// acknowledged is lost (issue 10, path 6; Kafka's KIP-966 eligible leader
// replicas and unclean shutdown detection).
//
// min ISR 2, --log-flush os, RF 3. Records A are acknowledged by all three,
// B by brokers 1 and 2 after broker 3 went. Then 2 goes (the ISR [1] is under
// min ISR: 2 joins the ELR, and no record can be acknowledged any more), then
// 1. The power loss is simulated on broker 1's disk: its log loses B (never
// written back) and its broker-state names another boot of the machine.
func TestUncleanShutdownOfTheLastIsrMemberLosesNothing(t *testing.T) {
	const session = 2 * time.Second
	c := newCtlCluster(t, session, "--min-insync-replicas", "2", "--log-flush", "os")
	c.createTopic("x", 1, 3)
	p, err := c.partitionState("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLeader() != 1 {
		// The assignment rotates by topic; this test's first topic starts at broker 1.
		t.Fatalf("leader %d, want 1 (replicas %v)", p.GetLeader(), p.GetReplicas())
	}
	produce := func(values ...string) {
		t.Helper()
		for _, v := range values {
			testutil.Eventually(t, 30*time.Second, func() error { return c.produceTo(1, "x", 0, v) })
		}
	}
	kill := func(id int32) {
		t.Helper()
		b, _ := c.broker(id)
		b.Kill()
		c.waitFenced(id)
	}
	segment := filepath.Join(c.dirs[1], "x-0", "00000000000000000000.log")

	produce("a1", "a2", "a3")
	kill(3)
	sizeA := fileSize(t, segment)
	produce("b1", "b2")
	kill(2)
	kill(1)
	if p, _ := c.partitionState("x", 0); p.GetLeader() != -1 || !slices.Equal(p.GetElr(), []int32{1, 2}) {
		t.Fatalf("after all three went: %v, want leaderless with ELR [1 2]", p)
	}

	// The power loss, on broker 1's disk.
	if err := os.Truncate(segment, sizeA); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(c.dirs[1], logmgr.BrokerStateFile)
	data, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	data = regexp.MustCompile(`boot\.id=.*`).ReplaceAll(data, []byte("boot.id=a-boot-before-the-power-loss"))
	if err := os.WriteFile(state, data, 0o644); err != nil {
		t.Fatal(err)
	}

	c.startBroker(1)
	c.waitAlive(1)
	p, err = c.partitionState("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLeader() != -1 {
		t.Fatalf("broker 1, back from an unclean shutdown without b1 b2, was elected: %v", p)
	}
	if !slices.Equal(p.GetElr(), []int32{2}) {
		t.Fatalf("ELR %v, want [2]: broker 1 leaves it", p.GetElr())
	}

	c.startBroker(2) // killed in the same boot: it lost nothing
	np := c.waitNewLeader("x", 0, -1, 30*time.Second)
	if np.GetLeader() != 2 {
		t.Fatalf("leader %d, want 2 (the ELR member)", np.GetLeader())
	}
	_, leader := c.broker(2)
	testutil.Eventually(t, 30*time.Second, func() error {
		d, err := leader.partition("x", 0)
		if err != nil {
			return err
		}
		if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER {
			return fmt.Errorf("broker 2 is %v", d.GetRole())
		}
		return nil
	})
	// Alone in the ISR, under min ISR 2, leader 2 moves no HW; broker 1
	// follows it, fetches b1 b2 back and rejoins the ISR.
	c.waitInIsr("x", 0, 1, 60*time.Second)
	want := []string{"a1", "a2", "a3", "b1", "b2"}
	testutil.Eventually(t, 30*time.Second, func() error {
		var got []string
		for _, r := range leader.consumeAll("x", 0) {
			got = append(got, string(r.GetValue()))
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("leader 2 serves %v, want every acknowledged record %v", got, want)
		}
		return nil
	})
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
