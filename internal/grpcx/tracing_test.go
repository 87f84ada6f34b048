package grpcx

import (
	"testing"

	"google.golang.org/grpc/stats"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func TestTraceFilter(t *testing.T) {
	if TraceFilter(true) != nil {
		t.Error("TraceFilter(true) filters: want every RPC traced")
	}
	f := TraceFilter(false)
	for method, traced := range map[string]bool{
		replicadv1.LogService_Produce_FullMethodName:                             false,
		replicadv1.LogService_Consume_FullMethodName:                             false,
		replicadv1.FetchService_Fetch_FullMethodName:                             false,
		replicadv1.FetchService_OffsetsForLeaderEpoch_FullMethodName:             true,
		replicadv1.ReplicaManagerService_LeaderAndIsr_FullMethodName:             true,
		replicadv1.ReplicaManagerService_StopReplica_FullMethodName:              true,
		replicadv1.ControllerService_AlterPartition_FullMethodName:               true,
		replicadv1.ReplicaManagerService_CheckpointHighWatermarks_FullMethodName: true,
	} {
		if got := f(&stats.RPCTagInfo{FullMethodName: method}); got != traced {
			t.Errorf("filter(%s) = %v, want %v", method, got, traced)
		}
	}
}
