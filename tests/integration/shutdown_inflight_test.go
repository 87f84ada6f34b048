package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// A broker stops within seconds of SIGTERM whatever request is in flight
// (issue 20): SIGTERM while a StopReplica deleting thousands of logs runs
// ends that request early or lets its batch finish (the partitions it did
// not reach answered BROKER_NOT_AVAILABLE, for the controller to resend), the broker exits 0
// promptly, and the restarted broker finds every log either deleted whole
// or intact with its records.
func TestSIGTERMDuringLargeStopReplicaExitsPromptly(t *testing.T) {
	const n = 4000
	// Exit well before this: the StopReplica stops at its next partition,
	// then the usual flush, HW checkpoint and close of the logs left.
	const exitWithin = 5 * time.Second
	dir := t.TempDir()
	b, c := startBroker(t, 1, dir)
	states := make([]*replicadv1.PartitionState, n)
	for i := range states {
		states[i] = leaderState("doomed", int32(i), 1, 1)
	}
	c.becomeLeader(1, states...)
	// One record in every 100th partition: what a restart must find in
	// the logs that were not deleted.
	for i := 0; i < n; i += 100 {
		c.produce("doomed", int32(i), 1, fmt.Sprintf("r%d", i))
	}

	stops := make([]*replicadv1.StopReplicaPartition, n)
	for i := range stops {
		stops[i] = &replicadv1.StopReplicaPartition{Topic: "doomed", Partition: int32(i), LeaderEpoch: 1, DeletePartition: true}
	}
	type answer struct {
		resp *replicadv1.StopReplicaResponse
		err  error
	}
	answered := make(chan answer, 1)
	before := len(b.Stderr())
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := c.rm.StopReplica(rctx, &replicadv1.StopReplicaRequest{ControllerId: 0, ControllerEpoch: 1, Partitions: stops})
		answered <- answer{resp, err}
	}()
	testutil.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(b.StderrFrom(before), "Handling StopReplica request") {
			return fmt.Errorf("the StopReplica has not started")
		}
		return nil
	})
	signalled := time.Now()
	b.Signal(syscall.SIGTERM)
	code, exited := b.Wait(exitWithin)
	if !exited {
		t.Fatalf("broker still running %v after SIGTERM during a StopReplica of %d partitions", exitWithin, n)
	}
	took := time.Since(signalled)
	if code != 0 {
		t.Fatalf("broker exited %d after SIGTERM; stderr:\n%s", code, b.Stderr())
	}
	a := <-answered
	if a.err != nil {
		t.Fatalf("StopReplica: %v", a.err)
	}
	deleted, left := map[int32]bool{}, 0
	for _, pe := range a.resp.GetPartitionErrors() {
		switch pe.GetErrorCode() {
		case replicadv1.ErrorCode_ERROR_CODE_NONE:
			deleted[pe.GetPartition()] = true
		case replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE:
			left++
		default:
			t.Fatalf("partition %d: %v", pe.GetPartition(), pe.GetErrorCode())
		}
	}
	// Since StopReplica deletes its logs in one batch per dir (a fraction of
	// a second for 4,000), the request often ends before the signal lands:
	// both outcomes are fine, what must hold is the prompt exit and a
	// consistent restart. TestStopReplicaDeletesNothingOnceLeaving (core)
	// proves a leaving broker starts no further delete.
	t.Logf("SIGTERM to exit %v; %d logs deleted, %d left for the controller to resend", took.Round(time.Millisecond), len(deleted), left)

	// Each log is there whole or gone.
	for i := range int32(n) {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("doomed-%d", i)))
		if deleted[i] != os.IsNotExist(err) {
			t.Fatalf("partition %d: deleted %v, but its dir: %v", i, deleted[i], err)
		}
	}
	b2, c2 := startBroker(t, 1, dir)
	defer b2.Kill()
	var again []*replicadv1.PartitionState
	for i := range int32(n) {
		if !deleted[i] {
			st := leaderState("doomed", i, 1, 2)
			st.IsNew = false
			again = append(again, st)
		}
	}
	c2.becomeLeader(2, again...)
	for i := int32(0); i < n; i += 100 {
		if deleted[i] {
			continue
		}
		recs := c2.consumeAll("doomed", i)
		if len(recs) != 1 || string(recs[0].GetValue()) != fmt.Sprintf("r%d", i) {
			t.Fatalf("partition %d after the restart: %v, want its one record", i, recs)
		}
	}
}

// The same for a LeaderAndIsr creating thousands of logs: SIGTERM ends it
// at its next partition (the rest answered BROKER_NOT_AVAILABLE, neither
// hosted nor created), the broker exits 0 promptly, and a restart hosts
// every log that was created.
func TestSIGTERMDuringLargeLeaderAndIsrExitsPromptly(t *testing.T) {
	const n = 10000
	const exitWithin = 5 * time.Second
	dir := t.TempDir()
	b, c := startBroker(t, 1, dir)
	states := make([]*replicadv1.PartitionState, n)
	for i := range states {
		states[i] = leaderState("many", int32(i), 1, 1)
	}
	type answer struct {
		resp *replicadv1.LeaderAndIsrResponse
		err  error
	}
	answered := make(chan answer, 1)
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		resp, err := c.rm.LeaderAndIsr(rctx, &replicadv1.LeaderAndIsrRequest{ControllerId: 0, ControllerEpoch: 1, PartitionStates: states})
		answered <- answer{resp, err}
	}()
	testutil.Eventually(t, 30*time.Second, func() error {
		select {
		case a := <-answered:
			t.Fatalf("LeaderAndIsr answered before SIGTERM: %v", a.err)
		default:
		}
		if !strings.Contains(b.Stderr(), "Handling LeaderAndIsr request") {
			return fmt.Errorf("the LeaderAndIsr has not started")
		}
		return nil
	})
	signalled := time.Now()
	b.Signal(syscall.SIGTERM)
	code, exited := b.Wait(exitWithin)
	if !exited {
		t.Fatalf("broker still running %v after SIGTERM during a LeaderAndIsr of %d new partitions", exitWithin, n)
	}
	took := time.Since(signalled)
	if code != 0 {
		t.Fatalf("broker exited %d after SIGTERM; stderr:\n%s", code, b.Stderr())
	}
	a := <-answered
	if a.err != nil {
		t.Fatalf("LeaderAndIsr: %v", a.err)
	}
	created, left := map[int32]bool{}, 0
	for _, pe := range a.resp.GetPartitionErrors() {
		switch pe.GetErrorCode() {
		case replicadv1.ErrorCode_ERROR_CODE_NONE:
			created[pe.GetPartition()] = true
		case replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE:
			left++
		default:
			t.Fatalf("partition %d: %v", pe.GetPartition(), pe.GetErrorCode())
		}
	}
	if left == 0 {
		t.Fatalf("the LeaderAndIsr of %d new partitions ran to the end after SIGTERM (exit %v after it): the request was not cut short", n, took)
	}
	t.Logf("SIGTERM to exit %v; %d logs created, %d left for the controller to resend", took.Round(time.Millisecond), len(created), left)
	for i := range int32(n) {
		_, err := os.Stat(filepath.Join(dir, fmt.Sprintf("many-%d", i)))
		if created[i] != (err == nil) {
			t.Fatalf("partition %d: created %v, but its dir: %v", i, created[i], err)
		}
	}
	b2, c2 := startBroker(t, 1, dir)
	defer b2.Kill()
	d := c2.describe()
	if len(d.GetPartitions()) != 0 {
		t.Fatalf("%d partitions hosted before any LeaderAndIsr", len(d.GetPartitions()))
	}
	var again []*replicadv1.PartitionState
	for i := range int32(n) {
		if created[i] {
			st := leaderState("many", i, 1, 2)
			st.IsNew = false
			again = append(again, st)
		}
	}
	c2.becomeLeader(2, again...)
}
