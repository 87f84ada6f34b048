package grpcx

import (
	"slices"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/stats"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// DataPlaneMethods are the hot RPCs: every produce, every consume, every
// follower fetch stream. They create no spans unless data-plane tracing is
// on (replicad --trace-data-plane); the control plane (LeaderAndIsr,
// StopReplica, UpdateMetadata, AlterPartition, admin calls, ...) always does.
var DataPlaneMethods = []string{
	replicadv1.LogService_Produce_FullMethodName,
	replicadv1.LogService_ProduceStream_FullMethodName,
	replicadv1.LogService_Consume_FullMethodName,
	replicadv1.FetchService_Fetch_FullMethodName,
}

// RoutineMethods are the steady beats of a healthy cluster: every broker
// heartbeats its controller several times a session timeout, and the
// health service is polled. They never create spans, whatever the flags: a
// trace of each would bury the state changes a user opens Jaeger for. What
// follows when heartbeats stop (a fencing) is traced by the controller as a
// span of its own.
var RoutineMethods = []string{
	replicadv1.ControllerService_BrokerHeartbeat_FullMethodName,
	healthpb.Health_Check_FullMethodName,
	healthpb.Health_Watch_FullMethodName,
}

// IsDataPlane reports whether fullMethod ("/package.Service/Method") is one
// of DataPlaneMethods.
func IsDataPlane(fullMethod string) bool { return slices.Contains(DataPlaneMethods, fullMethod) }

// TraceFilter is the otelgrpc filter of a replicad client or server: it
// leaves RoutineMethods out always and DataPlaneMethods unless
// traceDataPlane. A call left out still carries the trace context it was
// made in to the other side; it only starts no span of its own.
func TraceFilter(traceDataPlane bool) otelgrpc.Filter {
	return func(info *stats.RPCTagInfo) bool {
		if slices.Contains(RoutineMethods, info.FullMethodName) {
			return false
		}
		return traceDataPlane || !IsDataPlane(info.FullMethodName)
	}
}

// OtelOptions are the otelgrpc options of a replicad stats handler.
func OtelOptions(traceDataPlane bool) []otelgrpc.Option {
	return []otelgrpc.Option{otelgrpc.WithFilter(TraceFilter(traceDataPlane))}
}
