package integration

import (
	"fmt"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// TestIsrShrinkMinIsrAndRejoin ensures that a killed follower leaves the
// leader's ISR after the lag time (bumping the partition epoch), that acks=-1
// then answers NOT_ENOUGH_REPLICAS once the ISR is below
// min-insync-replicas, and that a restarted follower rejoins the ISR so that
// acks=-1 succeeds again, with every acknowledged record kept.
func TestIsrShrinkMinIsrAndRejoin(t *testing.T) {
	const lag = time.Second
	c := newCluster(t, "isr", "--min-insync-replicas", "2", "--replica-lag-time-max", lag.String())
	c.leaderAndIsr(clusterIDs, 1, 1, 1, 2, 3)

	var acked []string
	produceAll := func(value string) {
		t.Helper()
		resp, err := c.produce(1, -1, 10*time.Second, value)
		if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("acks=-1 produce of %q: %v %v", value, resp, err)
		}
		if resp.GetBaseOffset() != int64(len(acked)) {
			t.Fatalf("acks=-1 produce of %q at %d, want %d", value, resp.GetBaseOffset(), len(acked))
		}
		acked = append(acked, value)
	}
	// appendOne makes the leader's LEO move past the followers' without
	// waiting for them: a follower is out of sync only while it is behind.
	appendOne := func(value string) {
		t.Helper()
		resp, err := c.produce(1, 1, 10*time.Second, value)
		if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("acks=1 produce of %q: %v %v", value, resp, err)
		}
		if resp.GetBaseOffset() != int64(len(acked)) {
			t.Fatalf("acks=1 produce of %q at %d, want %d", value, resp.GetBaseOffset(), len(acked))
		}
		acked = append(acked, value)
	}

	for i := range 10 {
		produceAll(fmt.Sprintf("steady-%d", i))
	}
	start := c.describe(1)
	if got := start.GetIsr(); len(got) != 3 {
		t.Fatalf("ISR %v under steady replication, want [1 2 3]", got)
	}

	killed := time.Now()
	c.kill(3)
	appendOne("behind-3")
	afterShrink3 := c.waitIsr(1, 10*lag, 1, 2)
	// Its last caught-up time may precede the kill by up to one long-polled
	// fetch (500ms), so only a shrink well before the lag time is wrong.
	if waited := time.Since(killed); waited < lag/2 {
		t.Fatalf("follower 3 left the ISR %v after it died, well before the lag time %v", waited, lag)
	}
	if afterShrink3.GetPartitionEpoch() <= start.GetPartitionEpoch() {
		t.Fatalf("partition epoch %d after the shrink, was %d", afterShrink3.GetPartitionEpoch(), start.GetPartitionEpoch())
	}
	// ISR {1,2} meets min ISR 2: acks=-1 still succeeds.
	produceAll("isr-1-2")

	c.kill(2)
	appendOne("behind-2")
	afterShrink2 := c.waitIsr(1, 10*lag, 1)
	if afterShrink2.GetPartitionEpoch() <= afterShrink3.GetPartitionEpoch() {
		t.Fatalf("partition epoch %d after the second shrink, was %d", afterShrink2.GetPartitionEpoch(), afterShrink3.GetPartitionEpoch())
	}
	resp, err := c.produce(1, -1, 5*time.Second, "refused")
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS {
		t.Fatalf("acks=-1 with ISR [1] and min ISR 2: %v %v, want NOT_ENOUGH_REPLICAS", resp, err)
	}
	// The HW does not move while the ISR is under min ISR.
	if hw := c.describe(1).GetHighWatermark(); hw > afterShrink2.GetHighWatermark() {
		t.Fatalf("HW moved to %d under min ISR (was %d)", hw, afterShrink2.GetHighWatermark())
	}

	c.start(2)
	c.leaderAndIsr([]int32{2}, 1, 1, 1)
	rejoined := c.waitIsr(1, 20*time.Second, 1, 2)
	if rejoined.GetPartitionEpoch() <= afterShrink2.GetPartitionEpoch() {
		t.Fatalf("partition epoch %d after the expansion, was %d", rejoined.GetPartitionEpoch(), afterShrink2.GetPartitionEpoch())
	}
	produceAll("rejoined")

	got := c.records(1)
	if len(got) != len(acked) {
		t.Fatalf("leader holds %d records below its HW %v, want %d %v", len(got), got, len(acked), acked)
	}
	for i := range acked {
		if got[i] != acked[i] {
			t.Fatalf("offset %d holds %q, want %q", i, got[i], acked[i])
		}
	}
	leo, _ := c.waitCaughtUp(1, 2, 10*time.Second)
	if leo != int64(len(acked)) {
		t.Fatalf("LEO %d, want %d", leo, len(acked))
	}
}
