package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// segmentFiles are the segment (.log) files of a partition dir.
func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// segmentBases are the base offsets of the segments in a partition dir.
func segmentBases(t *testing.T, dir string) []int64 {
	t.Helper()
	var out []int64
	for _, n := range segmentFiles(t, dir) {
		b, err := strconv.ParseInt(strings.TrimSuffix(filepath.Base(n), ".log"), 10, 64)
		if err != nil {
			t.Fatalf("segment file %s: %v", n, err)
		}
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// TestDeleteRecordsWithFollowers runs three real brokers: ctlclient
// delete-records on the leader raises the log start of the leader and both
// in-sync followers and deletes their segments below it; a follower that was
// down, whose log ends below the new log start, comes back through the
// out-of-range path (truncated fully, restarted at the leader's log start)
// and catches up; a consume below the log start is OFFSET_OUT_OF_RANGE; and
// the log start survives a restart.
func TestDeleteRecordsWithFollowers(t *testing.T) {
	args := []string{"--segment-bytes", "4096", "--max-batch-bytes", "2048", "--replica-lag-time-max", "2s"}
	dirs := make([]string, 4)
	brokers := make([]*testutil.Broker, 4)
	clients := make([]*client, 4)
	start := func(id int32) {
		brokers[id] = testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: []string{dirs[id]}, Args: args})
		clients[id] = newClient(t, brokers[id].Dial(t))
	}
	var live []*replicadv1.Broker
	for id := int32(1); id <= 3; id++ {
		dirs[id] = t.TempDir()
		start(id)
		live = append(live, endpoint(t, id, brokers[id]))
	}
	state := func(isNew bool) *replicadv1.PartitionState {
		return &replicadv1.PartitionState{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1,
			Isr: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}, IsNew: isNew}
	}
	for id := int32(1); id <= 3; id++ {
		clients[id].sendLeaderAndIsr(1, state(true), live)
	}
	value := func(i int) string { return fmt.Sprintf("%03d-%s", i, strings.Repeat("v", 300)) }
	for i := range 30 {
		clients[1].produce("orders", 0, -1, value(i))
	}
	waitLEO := func(id int32, leo int64) {
		t.Helper()
		testutil.Eventually(t, 15*time.Second, func() error {
			p, err := clients[id].partition("orders", 0)
			if err != nil {
				return err
			}
			if p.GetLogEndOffset() != leo {
				return fmt.Errorf("broker %d LEO %d, want %d", id, p.GetLogEndOffset(), leo)
			}
			return nil
		})
	}
	waitLEO(3, 30)

	// Broker 3 goes down; the leader drops it from the ISR after the lag
	// time, and takes 30 more records with broker 2.
	brokers[3].Kill()
	// A follower is out of sync only while it is behind: append past it.
	clients[1].produce("orders", 0, 1, value(30))
	testutil.Eventually(t, 15*time.Second, func() error {
		p, err := clients[1].partition("orders", 0)
		if err != nil {
			return err
		}
		if slices.Contains(p.GetIsr(), 3) {
			return fmt.Errorf("ISR %v", p.GetIsr())
		}
		return nil
	})
	for i := 31; i < 60; i++ {
		clients[1].produce("orders", 0, -1, value(i))
	}
	before := segmentBases(t, filepath.Join(dirs[1], "orders-0"))

	r := ctlclient(t, brokers[1].Addr, "", "delete-records", "--topic", "orders", "--partition", "0", "--offset", "50").want(t, 0)
	if !strings.Contains(r.stdout, "orders-0: low watermark 50") {
		t.Fatalf("delete-records: %q, want low watermark 50", r.stdout)
	}
	// The answer came after the ISR (1 and 2) deleted: no wait here.
	for _, id := range []int32{1, 2} {
		p, err := clients[id].partition("orders", 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.GetLogStartOffset() != 50 {
			t.Fatalf("broker %d log start %d right after delete-records returned, want 50", id, p.GetLogStartOffset())
		}
	}
	after := segmentBases(t, filepath.Join(dirs[1], "orders-0"))
	if len(after) >= len(before) || (len(after) > 1 && after[1] <= 50) || after[0] > 50 {
		t.Fatalf("leader segments %v before, %v after deleting below 50: want the ones wholly below 50 gone, the one holding 50 kept", before, after)
	}
	resp, err := clients[1].log.Consume(ctx(t), &replicadv1.ConsumeRequest{Topic: "orders", Partition: 0, Offset: 10})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE || resp.GetLogStartOffset() != 50 {
		t.Fatalf("consume below the log start: %v %v, want OFFSET_OUT_OF_RANGE with log start 50", resp, err)
	}
	// Past the HW: refused, nothing changes.
	ctlclient(t, brokers[1].Addr, "", "delete-records", "--topic", "orders", "--partition", "0", "--offset", "61").want(t, 1)

	// Broker 3 comes back with a log ending at 30, below the leader's log
	// start: it restarts its log at 50 and catches up.
	start(3)
	clients[3].sendLeaderAndIsr(1, state(false), live)
	waitLEO(3, 60)
	for id := int32(1); id <= 3; id++ {
		testutil.Eventually(t, 15*time.Second, func() error {
			p, err := clients[id].partition("orders", 0)
			if err != nil {
				return err
			}
			if p.GetLogStartOffset() != 50 {
				return fmt.Errorf("broker %d log start %d, want 50", id, p.GetLogStartOffset())
			}
			// The log start moves first, then (once checkpointed) the
			// segments below it go.
			if segs := segmentBases(t, filepath.Join(dirs[id], "orders-0")); len(segs) > 1 && segs[1] <= 50 {
				return fmt.Errorf("broker %d keeps segments %v, some wholly below the log start 50", id, segs)
			}
			return nil
		})
	}
	// The survivors hold exactly the records from 50, as produced.
	recs := clients[1].consumeFrom("orders", 0, 50)
	if len(recs) != 10 || string(recs[0].GetValue()) != value(50) || string(recs[9].GetValue()) != value(59) {
		t.Fatalf("records from 50: %d, want 10 from %q", len(recs), value(50))
	}

	// The log start is checkpointed: a restarted follower keeps it.
	if code := brokers[2].Terminate(10 * time.Second); code != 0 {
		t.Fatalf("broker 2 exited %d", code)
	}
	start(2)
	clients[2].sendLeaderAndIsr(1, state(false), live)
	if p, err := clients[2].partition("orders", 0); err != nil || p.GetLogStartOffset() != 50 {
		t.Fatalf("restarted broker 2: %v %v, want log start 50", p, err)
	}
	if _, err := os.Stat(filepath.Join(dirs[2], "log-start-offset-checkpoint")); err != nil {
		t.Fatal(err)
	}
}
