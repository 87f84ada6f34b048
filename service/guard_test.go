package service

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// fixedGuard answers every check the same.
type fixedGuard struct {
	check ControllerCheck
	err   error
}

func (g fixedGuard) CheckController(context.Context, int32, int32) (ControllerCheck, error) {
	return g.check, g.err
}

// A control request the guard refuses reaches no replica manager: it is
// answered whole with the guard's code and reason, for every partition,
// with the controller epoch the broker follows; a guard that cannot tell is
// Unavailable, for the controller to retry.
func TestControllerGuardRefusals(t *testing.T) {
	refusal := ControllerCheck{Code: replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH, Message: "older than 9", FollowedEpoch: 9}
	rm := &fakeRM{}
	_, conn := startServerWith(t, Options{ReplicaManager: rm, ControllerGuard: fixedGuard{check: refusal}})
	c := replicadv1.NewReplicaManagerServiceClient(conn)
	ctx := context.Background()
	lai, err := c.LeaderAndIsr(ctx, &replicadv1.LeaderAndIsrRequest{ControllerId: 1, ControllerEpoch: 3, PartitionStates: []*replicadv1.PartitionState{
		{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, Isr: []int32{1}},
		{Topic: "t", Partition: 1, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, Isr: []int32{1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if lai.GetErrorCode() != refusal.Code || lai.GetErrorMessage() != refusal.Message || lai.GetControllerEpoch() != 9 || len(lai.GetPartitionErrors()) != 2 {
		t.Fatalf("refused LeaderAndIsr: %v", lai)
	}
	for _, pe := range lai.GetPartitionErrors() {
		if pe.GetErrorCode() != refusal.Code {
			t.Fatalf("partition error %v, want %v", pe, refusal.Code)
		}
	}
	sr, err := c.StopReplica(ctx, &replicadv1.StopReplicaRequest{ControllerId: 1, ControllerEpoch: 3,
		Partitions: []*replicadv1.StopReplicaPartition{{Topic: "t", Partition: 0, LeaderEpoch: -1}}})
	if err != nil || sr.GetErrorCode() != refusal.Code || sr.GetControllerEpoch() != 9 || len(sr.GetPartitionErrors()) != 1 ||
		sr.GetPartitionErrors()[0].GetErrorCode() != refusal.Code {
		t.Fatalf("refused StopReplica: %v %v", sr, err)
	}
	um, err := c.UpdateMetadata(ctx, &replicadv1.UpdateMetadataRequest{ControllerId: 1, ControllerEpoch: 3})
	if err != nil || um.GetErrorCode() != refusal.Code || um.GetErrorMessage() != refusal.Message || um.GetControllerEpoch() != 9 {
		t.Fatalf("refused UpdateMetadata: %v %v", um, err)
	}
	if calls := rm.Calls(); len(calls) != 0 {
		t.Fatalf("the replica manager saw refused requests: %v", calls)
	}

	_, conn = startServerWith(t, Options{ReplicaManager: rm, ControllerGuard: fixedGuard{err: errors.New("no controller answered")}})
	c = replicadv1.NewReplicaManagerServiceClient(conn)
	if _, err := c.UpdateMetadata(ctx, &replicadv1.UpdateMetadataRequest{ControllerId: 1, ControllerEpoch: 3}); status.Code(err) != codes.Unavailable {
		t.Fatalf("guard that cannot tell: %v, want Unavailable", err)
	}
}
