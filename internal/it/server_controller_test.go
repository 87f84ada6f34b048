package it

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// TestServerBinaryRunsTheController runs the controller as `replicad
// controller` (the server binary, as Kafka 4 does) with three real brokers:
// it creates a topic, takes acks=all records, elects a new leader when the
// old one is killed, survives its own restart with the state kept, and
// stops cleanly on SIGTERM.
func TestServerBinaryRunsTheController(t *testing.T) {
	c := newCtlClusterFrom(t, true, 2*time.Second, nil, nil)
	if !strings.Contains(c.ctl.Stderr(), "controller serving") {
		t.Fatalf("controller stderr lacks its start line:\n%s", c.ctl.Stderr())
	}
	c.createTopic("events", 1, 3)
	if err := c.produceToLeader("events", 0, "before"); err != nil {
		t.Fatalf("produce before the failover: %v", err)
	}
	p, err := c.partitionState("events", 0)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := c.broker(p.GetLeader())
	old.Signal(syscall.SIGKILL)
	c.waitFenced(p.GetLeader())
	np := c.waitNewLeader("events", 0, p.GetLeader(), 30*time.Second)
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceTo(np.GetLeader(), "events", 0, "after") })

	// Restarted on the same store, it keeps the partition's state.
	if code := c.ctl.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("replicad controller exited %d on SIGTERM; stderr:\n%s", code, c.ctl.Stderr())
	}
	if !strings.Contains(c.ctl.Stderr(), "controller stopped") {
		t.Fatalf("no clean stop in stderr:\n%s", c.ctl.Stderr())
	}
	c.startController()
	testutil.Eventually(t, 30*time.Second, func() error {
		q, err := c.partitionState("events", 0)
		if err != nil {
			return err
		}
		if q.GetLeader() != np.GetLeader() || q.GetLeaderEpoch() < np.GetLeaderEpoch() {
			return fmt.Errorf("after restart leader %d epoch %d, want %d epoch >= %d", q.GetLeader(), q.GetLeaderEpoch(), np.GetLeader(), np.GetLeaderEpoch())
		}
		return nil
	})
	if code := c.ctl.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("replicad controller exited %d on SIGTERM; stderr:\n%s", code, c.ctl.Stderr())
	}
}
