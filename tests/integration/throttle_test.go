package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// TestThrottleSparesARestartedFollower runs a controller and 4 brokers: a
// reassignment moving one replica of a partition to broker 4 runs under a
// 2 KiB/s throttle, the partition's other follower is killed, 1 MB is produced
// without it, and it comes back. Only the replica being added is throttled
// (Kafka throttles the moving replicas only): the restarted follower
// catches up at full speed and is back in the ISR within seconds, while
// broker 4 still copies at the throttle. Before, the throttle held back
// every follower outside the ISR: at 2 KiB/s the restarted one would have
// needed about 8 minutes, the partition under-replicated all along.
func TestThrottleSparesARestartedFollower(t *testing.T) {
	const (
		rate       = 2 << 10
		valueBytes = 10 << 10
		perCall    = 10
	)
	c := newCtlCluster(t, 3*time.Second)
	c.dirs[4] = t.TempDir()
	c.startBroker(4)
	c.waitAlive(1, 2, 3, 4)
	c.createTopic("spare", 1, 3)
	p, err := c.partitionState("spare", 0)
	if err != nil {
		t.Fatal(err)
	}
	original, leader := slices.Clone(p.GetReplicas()), p.GetLeader()
	var followers []int32
	for _, id := range original {
		if id != leader {
			followers = append(followers, id)
		}
	}
	// One follower stays (the one restarted), the other gives way to
	// broker 4, the only replica being added.
	follower, moved := followers[0], followers[1]
	_, lc := c.broker(leader)
	produce := func(calls int, tag string) {
		for i := range calls {
			values := make([]string, perCall)
			for j := range values {
				values[j] = fmt.Sprintf("%s-%05d-%s", tag, i*perCall+j, strings.Repeat("x", valueBytes))
			}
			lc.produce("spare", 0, -1, values...)
		}
	}
	produce(2, "before") // 200 KB: broker 4 needs over a minute for it

	target := slices.Clone(original)
	target[slices.Index(target, moved)] = 4
	plan := fmt.Sprintf(`{"version":1,"partitions":[{"topic":"spare","partition":0,"replicas":[%d,%d,%d]}]}`,
		target[0], target[1], target[2])
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(planFile, []byte(plan), 0o600); err != nil {
		t.Fatal(err)
	}
	moveStart := time.Now()
	runCtlclient(t, nil, "", "--controller", c.ctlAddr, "reassign", "--execute", "--plan", planFile, "--throttle", fmt.Sprint(rate)).want(t, 0)

	b, _ := c.broker(follower)
	b.Kill()
	testutil.Eventually(t, 30*time.Second, func() error {
		p, err := c.partitionState("spare", 0)
		if err != nil {
			return err
		}
		if slices.Contains(p.GetIsr(), follower) {
			return fmt.Errorf("ISR %v still holds the killed broker %d", p.GetIsr(), follower)
		}
		return nil
	})
	produce(100, "without") // 1 MB the restarted follower lacks
	c.startBroker(follower)
	back := time.Now()
	c.waitInIsr("spare", 0, follower, 20*time.Second)
	t.Logf("broker %d back in the ISR %v after its restart, 1 MB behind, under a %d B/s throttle",
		follower, time.Since(back).Round(time.Millisecond), rate)

	// The replica being added is still held to the throttle.
	p, err = c.partitionState("spare", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.GetAddingReplicas(), []int32{4}) || slices.Contains(p.GetIsr(), 4) {
		t.Fatalf("%v: want 4 still being added, out of the ISR", p)
	}
	elapsed := time.Since(moveStart)
	if copied, bound := logBytes(filepath.Join(c.dirs[4], "spare-0")), int64(elapsed.Seconds()*rate)+perCall*valueBytes+16<<10; copied > bound {
		t.Fatalf("broker 4 holds %d bytes %v after the throttled start, more than %d (rate %d B/s)", copied, elapsed, bound, rate)
	}
}
