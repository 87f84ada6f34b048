package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// A follower whose log is damaged at rest below its recovery point (a batch
// flipped on disk after a clean shutdown) opens it damaged instead of
// cutting the intact, committed records after the damage: asked to lead,
// it refuses with STORAGE_ERROR and changes nothing; asked to follow, it
// cuts the damage, fetches the rest from its leader, and then leads with
// every record intact (issue 10, path 9). Kafka's recovery, and this one's
// before, truncated at the damage: the broker then led with 5 of the 20
// committed records and its followers truncated to it.
func TestDamagedReplicaRefusesLeadershipAndIsRepairedFromItsLeader(t *testing.T) {
	c := newCluster(t, "x")
	c.leaderAndIsr(clusterIDs, 1, 1, 1, 2, 3)
	var want []string
	for i := range 20 {
		v := fmt.Sprintf("record-%02d-%s", i, strings.Repeat("v", 40))
		want = append(want, v)
		if resp, err := c.produce(1, -1, 10*time.Second, v); err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("produce %d: %v %v", i, resp, err)
		}
	}
	c.waitCaughtUp(1, 2, 30*time.Second)
	c.waitCaughtUp(1, 3, 30*time.Second)

	// A clean stop: everything is fsynced, the recovery point is the log end.
	if code := c.brokers[2].Terminate(60 * time.Second); code != 0 {
		t.Fatalf("broker 2 exited %d:\n%s", code, c.brokers[2].Stderr())
	}
	dir := filepath.Join(c.dirs[2], "x-0")
	damageRecord(t, filepath.Join(dir, "00000000000000000000.log"), want[5])
	// Without its index, recovery reads the whole segment and meets the damage.
	if err := os.Remove(filepath.Join(dir, "00000000000000000000.index")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	c.start(2)

	// Asked to lead, it refuses: its log lacks committed records.
	resp, err := c.clients[2].rm.LeaderAndIsr(ctx(t), &replicadv1.LeaderAndIsrRequest{ControllerEpoch: 1,
		PartitionStates: []*replicadv1.PartitionState{withControllerEpoch(c.state(2, 2, 2, 3))}, LiveLeaders: c.live()})
	if err != nil || resp.GetPartitionErrors()[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR {
		t.Fatalf("leadership of a damaged log: %v %v, want STORAGE_ERROR", resp, err)
	}
	p, err := c.clients[2].partition("x", 0)
	if err != nil || p.GetRole() == replicadv1.ReplicaRole_REPLICA_ROLE_LEADER || p.DamagedOffset == nil || p.GetDamagedOffset() != 5 {
		t.Fatalf("broker 2 after refusing: %v %v, want a follower described damaged at offset 5", p, err)
	}

	// As a follower of broker 1 it is repaired and catches up.
	c.leaderAndIsr(clusterIDs, 1, 2, 1, 2, 3)
	c.waitCaughtUp(1, 2, 30*time.Second)
	if p := c.describe(2); p.DamagedOffset != nil {
		t.Fatalf("broker 2 still described damaged after the repair: %v", p)
	}
	if !strings.Contains(c.brokers[2].Stderr(), "Repairing a log damaged below its recovery point") {
		t.Fatalf("no repair logged:\n%s", c.brokers[2].Stderr())
	}

	// Leading now, it serves every committed record, intact.
	c.leaderAndIsr(clusterIDs, 2, 3, 1, 2, 3)
	var got []string
	testutil.Eventually(t, 30*time.Second, func() error {
		if p, err := c.clients[2].partition("x", 0); err != nil || p.GetHighWatermark() < 20 {
			return fmt.Errorf("broker 2: %v %v", p, err)
		}
		got = c.records(2)
		return nil
	})
	if !slices.Equal(got, want) {
		t.Fatalf("broker 2 serves %d records %q, want the %d committed ones", len(got), got, len(want))
	}
}

// withControllerEpoch stamps st with controller epoch 1, as sendLeaderAndIsr does.
func withControllerEpoch(st *replicadv1.PartitionState) *replicadv1.PartitionState {
	st.ControllerEpoch = 1
	return st
}

// damageRecord overwrites 16 bytes inside value in the segment file.
func damageRecord(t *testing.T, segment, value string) {
	t.Helper()
	data, err := os.ReadFile(segment)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(data), value)
	if at < 0 {
		t.Fatalf("%q is not in %s", value, segment)
	}
	f, err := os.OpenFile(segment, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte("XXXXXXXXXXXXXXXX"), int64(at+10)); err != nil {
		t.Fatal(err)
	}
}
