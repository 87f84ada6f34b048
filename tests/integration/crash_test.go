package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// TestAcknowledgedRecordsSurviveKill ensures every record acknowledged with
// acks=1 or acks=-1 is still there, at its offset, after SIGKILL, a restart
// on the same dir and a new leader epoch, and that the log continues after it.
func TestAcknowledgedRecordsSurviveKill(t *testing.T) {
	dir := t.TempDir()
	b, c := startBroker(t, 1, dir)
	c.becomeLeader(1, leaderState("orders", 0, 1, 1))

	acked := map[int64]string{} // offset -> value
	next := int64(0)
	for i := range 10 {
		acks := int32(1)
		if i%2 == 1 {
			acks = -1
		}
		values := make([]string, 7)
		for j := range values {
			values[j] = fmt.Sprintf("batch%d-record%d-acks%d", i, j, acks)
		}
		base := c.produce("orders", 0, acks, values...)
		if base != next {
			t.Fatalf("batch %d base offset %d, want %d", i, base, next)
		}
		for j, v := range values {
			acked[base+int64(j)] = v
		}
		next += int64(len(values))
	}

	b.Kill()

	_, c = startBroker(t, 1, dir)
	st := leaderState("orders", 0, 1, 2)
	st.IsNew = false
	c.becomeLeader(2, st)
	// A sole-replica leader's HW reaches its LEO once it leads again.
	testutil.Eventually(t, 10*time.Second, func() error {
		p, err := c.partition("orders", 0)
		if err != nil {
			return err
		}
		if p.GetLeaderEpoch() != 2 || p.GetHighWatermark() != next {
			return fmt.Errorf("leader epoch %d HW %d, want 2 and %d", p.GetLeaderEpoch(), p.GetHighWatermark(), next)
		}
		return nil
	})

	recs := c.consumeAll("orders", 0)
	if int64(len(recs)) != next {
		t.Fatalf("consumed %d records, want %d", len(recs), next)
	}
	for _, r := range recs {
		if want := acked[r.GetOffset()]; string(r.GetValue()) != want || r.GetLeaderEpoch() != 1 {
			t.Errorf("offset %d: value %q epoch %d, want %q epoch 1", r.GetOffset(), r.GetValue(), r.GetLeaderEpoch(), want)
		}
	}

	if base := c.produce("orders", 0, -1, "after-restart"); base != next {
		t.Fatalf("first offset after restart %d, want %d", base, next)
	}
	recs = c.consumeAll("orders", 0)
	if last := recs[len(recs)-1]; string(last.GetValue()) != "after-restart" || last.GetLeaderEpoch() != 2 {
		t.Fatalf("last record %v, want after-restart in epoch 2", last)
	}
}
