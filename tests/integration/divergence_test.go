package integration

import (
	"fmt"
	"slices"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// TestDivergentFollowerTruncates ensures that a former leader holding acks=1
// records of an old epoch that were never replicated truncates them (by the
// diverging epoch) when it follows the new leader, and ends with the new
// leader's records at the same offsets, as seen when it leads again.
func TestDivergentFollowerTruncates(t *testing.T) {
	c := newCluster(t, "diverge")
	c.leaderAndIsr(clusterIDs, 1, 1, 1, 2, 3)

	// Epoch 1: records every replica holds.
	var want []string
	for i := range 5 {
		v := fmt.Sprintf("committed-%d", i)
		mustProduce(t, c, 1, -1, int64(len(want)), v)
		want = append(want, v)
	}
	for _, id := range []int32{2, 3} {
		c.waitCaughtUp(1, id, 10*time.Second)
	}

	// The followers die; the leader takes acks=1 records at epoch 1 that no
	// one else gets and that never commit.
	c.kill(2)
	c.kill(3)
	for i := range 3 {
		mustProduce(t, c, 1, 1, int64(len(want)+i), fmt.Sprintf("uncommitted-epoch1-%d", i))
	}
	old := c.describe(1)
	if old.GetLogEndOffset() != int64(len(want)+3) || old.GetHighWatermark() != int64(len(want)) {
		t.Fatalf("old leader LEO %d HW %d, want %d and %d", old.GetLogEndOffset(), old.GetHighWatermark(), len(want)+3, len(want))
	}
	c.kill(1)

	// Epoch 2: broker 2 leads with ISR {2,3} and takes more records than
	// the divergent suffix, so that without truncation broker 1 would fetch
	// from its own LEO and end with the right LEO but the wrong records.
	c.start(2)
	c.start(3)
	c.leaderAndIsr([]int32{2, 3}, 2, 2, 2, 3)
	for i := range 6 {
		v := fmt.Sprintf("epoch2-%d", i)
		mustProduce(t, c, 2, -1, int64(len(want)), v)
		want = append(want, v)
	}

	// Broker 1 comes back as a follower of 2 at epoch 2.
	c.start(1)
	c.leaderAndIsr([]int32{1}, 2, 2, 2, 3)
	c.waitIsr(2, 20*time.Second, 1, 2, 3)
	leo, hw := c.waitCaughtUp(2, 1, 10*time.Second)
	if leo != int64(len(want)) || hw != int64(len(want)) {
		t.Fatalf("after catching up LEO %d HW %d, want %d", leo, hw, len(want))
	}
	if got := c.records(2); !slices.Equal(got, want) {
		t.Fatalf("leader 2 holds %v, want %v", got, want)
	}

	// Broker 1 leads again at epoch 3: its log is the leader's.
	c.leaderAndIsr(clusterIDs, 1, 3, 1, 2, 3)
	mustProduce(t, c, 1, -1, int64(len(want)), "epoch3-0")
	want = append(want, "epoch3-0")
	if got := c.records(1); !slices.Equal(got, want) {
		t.Fatalf("broker 1 holds %v after leading again, want %v", got, want)
	}
}

// mustProduce sends value to broker id with acks and requires NONE at offset want.
func mustProduce(t *testing.T, c *cluster, id, acks int32, want int64, value string) {
	t.Helper()
	resp, err := c.produce(id, acks, 10*time.Second, value)
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("acks=%d produce of %q to broker %d: %v %v", acks, value, id, resp, err)
	}
	if resp.GetBaseOffset() != want {
		t.Fatalf("acks=%d produce of %q to broker %d at %d, want %d", acks, value, id, resp.GetBaseOffset(), want)
	}
}
