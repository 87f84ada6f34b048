package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func (f *fakeController) AlterReplicationThrottle(_ context.Context, req *replicadv1.AlterReplicationThrottleRequest) (*replicadv1.AlterReplicationThrottleResponse, error) {
	if _, standby := f.note("AlterReplicationThrottle", req); standby {
		return &replicadv1.AlterReplicationThrottleResponse{ErrorCode: notController}, nil
	}
	return &replicadv1.AlterReplicationThrottleResponse{}, nil
}

// requestsOf are the recorded requests of one type.
func requestsOf[T proto.Message](f *fakeController) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, r := range f.requests {
		if m, ok := r.(T); ok {
			out = append(out, m)
		}
	}
	return out
}

func writePlan(t *testing.T, plan string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(path, []byte(plan), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func fourBrokers(parts ...*replicadv1.ClusterPartition) *replicadv1.DescribeClusterResponse {
	resp := clusterWith(parts...)
	resp.Brokers = []*replicadv1.BrokerDescription{{Id: 1}, {Id: 2}, {Id: 3}, {Id: 4}}
	return resp
}

// --execute refuses a plan with a bad entry before starting anything or
// setting the throttle; a good one sets the throttle, then starts each
// move that changes something.
func TestReassignExecuteValidatesFirst(t *testing.T) {
	f := newFakeController()
	f.describe = func(int) *replicadv1.DescribeClusterResponse {
		return fourBrokers(orders(0, 1, 1, 2, 3), orders(1, 2, 2, 3, 1))
	}
	addr := startController(t, f)
	bad := writePlan(t, `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,4]},{"topic":"orders","partition":1,"replicas":[2,3,9]}]}`)
	r := ctl(t, "", "", "--controller", addr, "reassign", "--execute", "--plan", bad, "--throttle", "1000")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "partitions[1] (orders-1): broker 9 is not a registered broker", "nothing was started")
	if n := f.callCount("ReassignPartition") + f.callCount("AlterReplicationThrottle"); n != 0 {
		t.Fatalf("%d calls after a refused plan", n)
	}

	good := writePlan(t, `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,4]},{"topic":"orders","partition":1,"replicas":[2,3,1]}]}`)
	r = ctl(t, "", "", "--controller", addr, "reassign", "--execute", "--plan", good, "--throttle", "1000")
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.stdout, "Current partition replica assignment\n"+
		`{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,3]},{"topic":"orders","partition":1,"replicas":[2,3,1]}]}`,
		"Started 1 reassignment(s); 1 partition(s) of the plan already had their replicas.")
	throttles := requestsOf[*replicadv1.AlterReplicationThrottleRequest](f)
	moves := requestsOf[*replicadv1.ReassignPartitionRequest](f)
	if len(throttles) != 1 || throttles[0].GetBytesPerSec() != 1000 {
		t.Fatalf("throttle requests %v", throttles)
	}
	if len(moves) != 1 || !proto.Equal(moves[0], &replicadv1.ReassignPartitionRequest{Topic: "orders", Partition: 0, Replicas: []int32{1, 2, 4}}) {
		t.Fatalf("moves %v", moves)
	}

	r = ctl(t, "", "", "--controller", addr, "reassign", "--execute", "--plan", good, "--topics", "orders")
	wantCode(t, r, 2)
	r = ctl(t, "", "", "--controller", addr, "reassign", "--execute", "--verify", "--plan", good)
	wantCode(t, r, 2)
}

// --verify exits 1 while a move runs, naming who is catching up, and once
// all is complete exits 0 and removes the throttle.
func TestReassignVerifyRemovesThrottleWhenComplete(t *testing.T) {
	f := newFakeController()
	moving := orders(0, 1, 1, 2, 4, 3)
	moving.Isr = []int32{1, 2, 3}
	moving.AddingReplicas, moving.RemovingReplicas = []int32{4}, []int32{3}
	f.describe = func(n int) *replicadv1.DescribeClusterResponse {
		if n == 1 {
			return fourBrokers(moving)
		}
		return fourBrokers(orders(0, 1, 1, 2, 4))
	}
	addr := startController(t, f)
	plan := writePlan(t, `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,4]}]}`)
	r := ctl(t, "", "", "--controller", addr, "reassign", "--verify", "--plan", plan)
	wantCode(t, r, 1)
	wantContains(t, "stdout", r.stdout, "orders-0: in progress: adding 4, removing 3: ISR 1,2,3, waiting for 4", "0 of 1 partition(s) complete")
	if n := f.callCount("AlterReplicationThrottle"); n != 0 {
		t.Fatalf("throttle changed while a move runs")
	}
	r = ctl(t, "", "", "--controller", addr, "reassign", "--verify", "--plan", plan)
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.stdout, "orders-0: complete: replicas 1,2,4", "Replication throttle removed.")
	if th := requestsOf[*replicadv1.AlterReplicationThrottleRequest](f); len(th) != 1 || th[0].GetBytesPerSec() != 0 {
		t.Fatalf("throttle requests %v, want one removal", th)
	}
}

// --cancel without a plan cancels every partition in flight and removes
// the throttle; --generate prints both assignments.
func TestReassignCancelAndGenerate(t *testing.T) {
	f := newFakeController()
	moving := orders(1, 1, 1, 2, 4, 3)
	moving.AddingReplicas, moving.RemovingReplicas = []int32{4}, []int32{3}
	f.describe = func(int) *replicadv1.DescribeClusterResponse { return fourBrokers(orders(0, 1, 1, 2, 3), moving) }
	f.reassignResp = &replicadv1.ReassignPartitionResponse{Partition: orders(1, 1, 1, 2, 3)}
	addr := startController(t, f)
	r := ctl(t, "", "", "--controller", addr, "reassign", "--cancel")
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.stdout, "orders-1: cancelled: replicas 1,2,3", "Replication throttle removed.")
	if moves := requestsOf[*replicadv1.ReassignPartitionRequest](f); len(moves) != 1 ||
		!proto.Equal(moves[0], &replicadv1.ReassignPartitionRequest{Topic: "orders", Partition: 1, Cancel: true}) {
		t.Fatalf("cancel requests %v", moves)
	}

	r = ctl(t, "", "", "--controller", addr, "reassign", "--generate", "--topics", "orders", "--brokers", "1,2,4")
	wantCode(t, r, 0)
	out := r.stdout
	cur := strings.Index(out, "Current partition replica assignment\n")
	prop := strings.Index(out, "Proposed partition reassignment configuration\n")
	if cur < 0 || prop < cur {
		t.Fatalf("generate output:\n%s", out)
	}
	wantContains(t, "stdout", out, `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,3]},{"topic":"orders","partition":1,"replicas":[1,2,4]}]}`)
	r = ctl(t, "", "", "--controller", addr, "reassign", "--generate", "--topics", "nope", "--brokers", "1,2,4")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "unknown topic(s) nope")
}

// A move the controller refuses and a cancel it refuses are each named
// with the partition and the answer's code; the other moves go on.
func TestReassignRefusalsWording(t *testing.T) {
	f := newFakeController()
	moving := orders(1, 1, 1, 2, 4, 3)
	moving.AddingReplicas, moving.RemovingReplicas = []int32{4}, []int32{3}
	f.describe = func(int) *replicadv1.DescribeClusterResponse { return fourBrokers(orders(0, 1, 1, 2, 3), moving) }
	f.reassignResp = &replicadv1.ReassignPartitionResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT, ErrorMessage: "no"}
	addr := startController(t, f)
	plan := writePlan(t, `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,4]}]}`)
	r := ctl(t, "", "", "--controller", addr, "reassign", "--execute", "--plan", plan)
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "reassign --execute: 1 move(s) not started:\n  orders-0: INVALID_REPLICA_ASSIGNMENT: no")
	wantContains(t, "stdout", r.stdout, "Started 0 reassignment(s); 0 partition(s) of the plan already had their replicas.")

	r = ctl(t, "", "", "--controller", addr, "reassign", "--cancel")
	wantCode(t, r, 1)
	wantContains(t, "stdout", r.stdout, "orders-1: failed: cancel: INVALID_REPLICA_ASSIGNMENT: no")
	wantContains(t, "stderr", r.stderr, "reassign --cancel: 1 cancel(s) failed:\n  orders-1: cancel: INVALID_REPLICA_ASSIGNMENT: no")
}
