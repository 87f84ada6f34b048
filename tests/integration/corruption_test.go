package integration

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// A leader whose log is damaged at rest serves none of the damage: a
// consumer gets CORRUPT_MESSAGE at the damaged offset, the leader gives the
// partition up (its log dir stays online), the controller moves the
// leadership to a healthy ISR member, and every record reads back intact from
// there (issue 10, path 9).
func TestDamagedLeaderLogGivesUpLeadership(t *testing.T) {
	c := newCtlCluster(t, 2*time.Second)
	c.createTopic("x", 1, 3)
	want := []string{"a-" + strings.Repeat("a", 60), "b-" + strings.Repeat("b", 60), "c-" + strings.Repeat("c", 60)}
	for _, v := range want {
		testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("x", 0, v) })
	}
	p, err := c.partitionState("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	old := p.GetLeader()
	// Flip bytes inside the second record's value on the leader's disk.
	damageRecord(t, filepath.Join(c.dirs[old], "x-0", "00000000000000000000.log"), want[1])

	_, lcl := c.broker(old)
	resp, err := lcl.log.Consume(ctx(t), &replicadv1.ConsumeRequest{Topic: "x", Partition: 0, Offset: 1})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE {
		t.Fatalf("consume at the damaged batch: %v %v, want CORRUPT_MESSAGE", resp, err)
	}
	np := c.waitNewLeader("x", 0, old, 20*time.Second)
	if slices.Contains(np.GetIsr(), old) {
		t.Fatalf("the damaged replica is still in the ISR: %v", np)
	}
	b, _ := c.broker(old)
	if !b.Running() {
		t.Fatalf("the broker with the damaged log exited:\n%s", b.Stderr())
	}
	for _, d := range lcl.describe().GetLogDirs() {
		if !d.GetOnline() {
			t.Fatalf("the damaged batch took log dir %s offline", d.GetPath())
		}
	}
	_, ncl := c.broker(np.GetLeader())
	testutil.Eventually(t, 30*time.Second, func() error {
		d, err := ncl.partition("x", 0)
		if err != nil {
			return err
		}
		if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER || d.GetHighWatermark() < 3 {
			return errNotAcked
		}
		return nil
	})
	var got []string
	for _, r := range ncl.consumeAll("x", 0) {
		got = append(got, string(r.GetValue()))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the new leader serves %v, want %v", got, want)
	}
}
