package integration

import (
	"strings"
	"testing"
	"time"
)

// TestCarelessCreateRefusedUpFront ensures the command that once took a
// cluster down, create-topic --partitions 100000, is refused by the
// controller before anything is created, with an error naming the brokers,
// their counts and their --max-partitions, ctlclient exiting non-zero; the
// topics already there keep taking writes.
func TestCarelessCreateRefusedUpFront(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second, "--max-partitions", "50")
	ctl := func(args ...string) ctlResult {
		return runCtlclientEnv(t, nil, append([]string{"--controller", c.ctlAddr}, args...)...)
	}
	ctl("create-topic", "--topic", "orders", "--partitions", "3", "--replication-factor", "3").want(t, 0)
	if err := c.produceToLeader("orders", 0, "before"); err != nil {
		t.Fatal(err)
	}
	r := ctl("create-topic", "--topic", "huge", "--partitions", "100000", "--replication-factor", "3").want(t, 1)
	for _, want := range []string{"WILL_EXCEED_PARTITION_LIMITS", "broker 1 would host 100003 partitions (3 now + 100000 new), its --max-partitions is 50", "broker 3"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	// Fits: 47 more on each broker reaches 50 exactly.
	ctl("create-topic", "--topic", "fits", "--partitions", "47", "--replication-factor", "3").want(t, 0)
	r = ctl("create-topic", "--topic", "one-more", "--partitions", "1", "--replication-factor", "1").want(t, 1)
	if !strings.Contains(r.stderr, "WILL_EXCEED_PARTITION_LIMITS") {
		t.Errorf("a create past the full budget:\n%s", r.stderr)
	}
	d := ctl("-o", "json", "describe-cluster").want(t, 0)
	if strings.Contains(d.stdout, `"huge"`) || strings.Contains(d.stdout, `"one-more"`) {
		t.Errorf("a refused topic exists:\n%s", d.stdout)
	}
	if err := c.produceToLeader("orders", 0, "after"); err != nil {
		t.Fatalf("produce after the refusals: %v", err)
	}
}
