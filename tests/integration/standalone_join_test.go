package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/core/logmgr"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// A broker that ran standalone (as docs/getting-started.md does: logs of no
// topic ID, records at leader epoch 1) joins a controller that creates a
// topic of the same name. Its old logs are set aside (kept in *-stray dirs,
// logged by state.change), never served as the new topic's: every replica
// of the new topic serves exactly the new records, the ISR fills, and
// acks=all succeeds. Before, the broker took the new topic ID for its old
// logs, served their records, and its epoch cache went 1 then 0: followers
// looped on the diverging epoch and acks=all never succeeded (issue 19,
// path 5).
func TestStandaloneLogsAreSetAsideWhenJoiningAController(t *testing.T) {
	c := newCtlCluster(t, 2*time.Second)
	b1, _ := c.broker(1)
	b1.Kill()
	c.waitFenced(1)

	// Broker 1 runs standalone on a dir of its own and takes writes.
	dir := t.TempDir()
	sb, scl := startBroker(t, 1, dir)
	const partitions = 3
	for p := range int32(partitions) {
		scl.becomeLeader(1, leaderState("orders", p, 1, 1))
		scl.produce("orders", p, 1, fmt.Sprintf("standalone-%d-0", p), fmt.Sprintf("standalone-%d-1", p))
	}
	if code := sb.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("standalone broker exited %d", code)
	}

	// It joins the cluster with that dir; the controller creates "orders".
	c.dirs[1] = dir
	c.startBroker(1)
	c.waitAlive(1)
	c.createTopic("orders", partitions, 3)
	want := map[int32][]string{}
	for p := range int32(partitions) {
		for i := range 3 {
			v := fmt.Sprintf("new-%d-%d", p, i)
			want[p] = append(want[p], v)
			testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("orders", p, v) })
		}
		c.waitInIsr("orders", p, 1, 30*time.Second)
	}

	// Every replica, made leader in turn, serves exactly the new records.
	for p := range int32(partitions) {
		for _, id := range clusterIDs {
			if st, _ := c.partitionState("orders", p); st.GetLeader() != id {
				runCtlclient(t, nil, "", "--controller", c.ctlAddr, "elect", "--topic", "orders", "--partition", itoa(int(p)),
					"--leader", itoa(int(id))).want(t, 0)
			}
			_, cl := c.broker(id)
			testutil.Eventually(t, 30*time.Second, func() error {
				d, err := cl.partition("orders", p)
				if err != nil {
					return err
				}
				if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER || d.GetHighWatermark() < int64(len(want[p])) {
					return fmt.Errorf("broker %d: %v", id, d)
				}
				return nil
			})
			var got []string
			for _, r := range cl.consumeAll("orders", p) {
				got = append(got, string(r.GetValue()))
			}
			if !slices.Equal(got, want[p]) {
				t.Fatalf("broker %d serves orders-%d as %v, want %v", id, p, got, want[p])
			}
		}
		// acks=all still succeeds with broker 1 leading or following.
		testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("orders", p, "after-elections") })
	}

	// The old records are kept, set aside, and the broker said so.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var aside []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), logmgr.StrayDirSuffix) {
			aside = append(aside, e.Name())
			if segs, _ := filepath.Glob(filepath.Join(dir, e.Name(), "*.log")); len(segs) == 0 {
				t.Errorf("set-aside dir %s holds no segment", e.Name())
			}
		}
	}
	if len(aside) != partitions {
		t.Fatalf("set-aside dirs %v, want one per partition (%d)", aside, partitions)
	}
	b1, _ = c.broker(1)
	if n := strings.Count(b1.Stderr(), "Setting aside a log of no topic ID"); n != partitions {
		t.Errorf("broker 1 logged %d logs set aside, want %d", n, partitions)
	}
}
