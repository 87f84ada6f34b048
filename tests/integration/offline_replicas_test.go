package integration

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/internal/testutil"
)

// A leader's log dir fails while the broker keeps running on its other dir:
// the broker reports its offline replicas in its heartbeats, the controller
// moves the leadership to a healthy ISR member, drops the replica from the
// ISR and never elects it, and acks=all writes go on (issue 10, path 4).
// Before, the followers retried STORAGE_ERROR for ever and the partition had
// no working leader.
func TestLogDirFailureMovesLeadershipAway(t *testing.T) {
	c := newCtlClusterDirs(t, 2*time.Second, nil, map[int32]int{1: 1}, "--min-insync-replicas", "2", "--hw-checkpoint-interval", "200ms")
	c.createTopic("x", 1, 3)
	p, err := c.partitionState("x", 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetLeader() != 1 {
		t.Fatalf("leader %d, want 1", p.GetLeader())
	}
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceTo(1, "x", 0, "before") })
	// x-0 is in broker 1's first dir: its next HW checkpoint cannot create
	// its temporary file there, which takes the dir offline (a directory in
	// the way fails the write even for root).
	if _, err := os.Stat(filepath.Join(c.dirs[1], "x-0")); err != nil {
		t.Fatalf("x-0 is not in broker 1's first dir: %v", err)
	}
	if err := os.Mkdir(filepath.Join(c.dirs[1], logmgr.ReplicationOffsetCheckpoint+".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	np := c.waitNewLeader("x", 0, 1, 20*time.Second)
	if slices.Contains(np.GetIsr(), 1) || !slices.Contains(np.GetOfflineReplicas(), 1) {
		t.Fatalf("after broker 1's dir failed: %v, want it out of the ISR and listed offline", np)
	}
	b1, _ := c.broker(1)
	if !b1.Running() {
		t.Fatalf("broker 1 exited; it still has a log dir online:\n%s", b1.Stderr())
	}
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceTo(np.GetLeader(), "x", 0, "after") })
	// Broker 1 is not elected back.
	r := runCtlclient(t, nil, "", "--controller", c.ctlAddr, "elect", "--topic", "x", "--partition", "0", "--leader", "1")
	if r.code == 0 {
		t.Fatalf("electing the offline replica succeeded:\n%s", r.stdout)
	}
	if p, _ := c.partitionState("x", 0); p.GetLeader() == 1 {
		t.Fatalf("broker 1 leads again: %v", p)
	}
}
