package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// logBytes is the size of a partition dir's segment files, 0 when there is
// no such dir (yet, or any more).
func logBytes(dir string) int64 {
	names, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	var n int64
	for _, name := range names {
		if fi, err := os.Stat(name); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// TestReassignPlanThrottledThenCancelled runs a controller and 4 brokers: a
// plan moving one replica of a topic holding 3 MB to broker 4, executed
// with a 256 KB/s throttle, copies no faster than the throttle while
// acks=all produces go on; reassign --cancel then brings the old replica
// set back, broker 4 deletes its log, and every acknowledged record is
// there. The same plan executed again without a throttle completes under
// --wait, and --verify then passes.
func TestReassignPlanThrottledThenCancelled(t *testing.T) {
	const (
		rate       = 256 << 10
		valueBytes = 10 << 10
		perCall    = 10
		calls      = 30 // 3 MB
	)
	c := newCtlCluster(t, 6*time.Second)
	c.dirs[4] = t.TempDir()
	c.startBroker(4)
	c.waitAlive(1, 2, 3, 4)
	c.createTopic("moves", 1, 3)
	p, err := c.partitionState("moves", 0)
	if err != nil {
		t.Fatal(err)
	}
	original := slices.Clone(p.GetReplicas())
	leader := p.GetLeader()
	_, lc := c.broker(leader)
	var acked []string
	for i := range calls {
		values := make([]string, perCall)
		for j := range values {
			values[j] = fmt.Sprintf("%05d-%s", i*perCall+j, strings.Repeat("x", valueBytes))
		}
		lc.produce("moves", 0, -1, values...)
		acked = append(acked, values...)
	}
	total := logBytes(filepath.Join(c.dirs[leader], "moves-0"))
	if total < calls*perCall*valueBytes {
		t.Fatalf("leader holds %d bytes, want 3 MB", total)
	}

	// Replace the last replica (not the leader: the first) by broker 4.
	target := append(slices.Clone(original[:2]), 4)
	plan := fmt.Sprintf(`{"version":1,"partitions":[{"topic":"moves","partition":0,"replicas":[%d,%d,%d]}]}`, target[0], target[1], target[2])
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(plan), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := runCtlclient(t, nil, "", "--controller", c.ctlAddr, "reassign", "--execute", "--plan", planFile, "--throttle", fmt.Sprint(rate)).want(t, 0)
	wantIn(t, r.stdout, "Current partition replica assignment", fmt.Sprintf(`"replicas":[%d,%d,%d]`, original[0], original[1], original[2]), "Started 1 reassignment(s)")

	// The copy runs at the throttle: at every look, broker 4 holds at most
	// rate x elapsed, plus one batch (a fetch's first batch is always
	// whole). Meanwhile acks=all produces to the ISR succeed.
	dir4 := filepath.Join(c.dirs[4], "moves-0")
	slack := int64(perCall*valueBytes + 16<<10)
	var copied int64
	for i := 0; time.Since(start) < 4*time.Second; i++ {
		copied = logBytes(dir4)
		elapsed := time.Since(start)
		if bound := int64(elapsed.Seconds()*rate) + slack; copied > bound {
			t.Fatalf("broker 4 holds %d bytes %v after the throttled start, more than %d (rate %d B/s)", copied, elapsed, bound, rate)
		}
		v := fmt.Sprintf("during-%d", i)
		if err := c.produceTo(leader, "moves", 0, v); err != nil {
			t.Fatalf("acks=all produce during the move: %v", err)
		}
		acked = append(acked, v)
		time.Sleep(200 * time.Millisecond) // the sampling period, not a wait for a condition
	}
	if copied == 0 {
		t.Fatal("broker 4 copied nothing in 4s: the move is not running")
	}
	p, err = c.partitionState("moves", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.GetAddingReplicas(), []int32{4}) || slices.Contains(p.GetIsr(), 4) {
		t.Fatalf("after 4s of a %d-byte copy at %d B/s: %v, want 4 still adding, out of the ISR", total, rate, p)
	}
	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "reassign", "--verify", "--plan", planFile).want(t, 1)
	wantIn(t, r.stdout, "moves-0: in progress", "waiting for 4")
	t.Logf("broker 4 copied %d of %d bytes in %v at %d B/s", copied, total, time.Since(start).Round(time.Millisecond), rate)

	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "reassign", "--cancel", "--plan", planFile).want(t, 0)
	wantIn(t, r.stdout, "moves-0: cancelled", "Replication throttle removed.")
	testutil.Eventually(t, 30*time.Second, func() error {
		p, err := c.partitionState("moves", 0)
		if err != nil {
			return err
		}
		if !slices.Equal(p.GetReplicas(), original) || len(p.GetAddingReplicas())+len(p.GetRemovingReplicas()) != 0 || !sameSet(p.GetIsr(), original) {
			return fmt.Errorf("after cancel: %v, want replicas and ISR %v", p, original)
		}
		if left, _ := filepath.Glob(filepath.Join(c.dirs[4], "moves-0*")); len(left) > 0 {
			return fmt.Errorf("broker 4 still has %v", left)
		}
		_, c4 := c.broker(4)
		for _, d := range c4.describe().GetPartitions() {
			if d.GetTopic() == "moves" {
				return fmt.Errorf("broker 4 still hosts moves-%d", d.GetPartition())
			}
		}
		return nil
	})
	for _, v := range []string{"after-cancel-0", "after-cancel-1"} {
		if err := c.produceToLeader("moves", 0, v); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, v)
	}
	p, _ = c.partitionState("moves", 0)
	_, lc = c.broker(p.GetLeader())
	got := lc.consumeAll("moves", 0)
	if len(got) != len(acked) {
		t.Fatalf("%d records after the cancel, %d acknowledged", len(got), len(acked))
	}
	for i, rec := range got {
		if string(rec.GetValue()) != acked[i] {
			t.Fatalf("record %d is %.20q, want %.20q", i, rec.GetValue(), acked[i])
		}
	}

	// Again without a throttle: --wait follows it to the end, -o json gives
	// one result, and --verify passes.
	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "-o", "json", "reassign", "--execute", "--plan", planFile, "--wait", "--wait-timeout", "25s").want(t, 0)
	var res struct {
		Complete   bool `json:"complete"`
		Partitions []struct {
			Status   string  `json:"status"`
			Replicas []int32 `json:"replicas"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("--wait -o json printed %q: %v", r.stdout, err)
	}
	if !res.Complete || len(res.Partitions) != 1 || res.Partitions[0].Status != "complete" || !slices.Equal(res.Partitions[0].Replicas, target) {
		t.Fatalf("--wait result %+v, want complete with replicas %v", res, target)
	}
	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "reassign", "--verify", "--plan", planFile).want(t, 0)
	wantIn(t, r.stdout, "moves-0: complete", "1 of 1 partition(s) complete")
}

func wantIn(t *testing.T, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Fatalf("output lacks %q:\n%s", sub, s)
		}
	}
}

func sameSet(a, b []int32) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
