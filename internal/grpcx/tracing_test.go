package grpcx

import (
	"testing"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/stats"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func TestTraceFilter(t *testing.T) {
	// method -> traced without and with --trace-data-plane.
	for method, traced := range map[string][2]bool{
		replicadv1.LogService_Produce_FullMethodName:                             {false, true},
		replicadv1.LogService_Consume_FullMethodName:                             {false, true},
		replicadv1.FetchService_Fetch_FullMethodName:                             {false, true},
		replicadv1.FetchService_OffsetsForLeaderEpoch_FullMethodName:             {true, true},
		replicadv1.ReplicaManagerService_LeaderAndIsr_FullMethodName:             {true, true},
		replicadv1.ReplicaManagerService_StopReplica_FullMethodName:              {true, true},
		replicadv1.ControllerService_AlterPartition_FullMethodName:               {true, true},
		replicadv1.ControllerService_RegisterBroker_FullMethodName:               {true, true},
		replicadv1.ControllerService_ControlledShutdown_FullMethodName:           {true, true},
		replicadv1.ReplicaManagerService_CheckpointHighWatermarks_FullMethodName: {true, true},
		replicadv1.ControllerService_BrokerHeartbeat_FullMethodName:              {false, false},
		healthpb.Health_Check_FullMethodName:                                     {false, false},
	} {
		for i, dataPlane := range []bool{false, true} {
			f := TraceFilter(dataPlane)
			if got := f(&stats.RPCTagInfo{FullMethodName: method}); got != traced[i] {
				t.Errorf("TraceFilter(%v)(%s) = %v, want %v", dataPlane, method, got, traced[i])
			}
		}
	}
}
