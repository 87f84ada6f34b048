package grpcx

import (
	"slices"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc/stats"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// DataPlaneMethods are the hot RPCs: every produce, every consume, every
// follower fetch stream. They create no spans unless data-plane tracing is
// on (replicad --trace-data-plane); the control plane (LeaderAndIsr,
// StopReplica, UpdateMetadata, AlterPartition, admin calls, ...) always does.
var DataPlaneMethods = []string{
	replicadv1.LogService_Produce_FullMethodName,
	replicadv1.LogService_Consume_FullMethodName,
	replicadv1.FetchService_Fetch_FullMethodName,
}

// IsDataPlane reports whether fullMethod ("/package.Service/Method") is one
// of DataPlaneMethods.
func IsDataPlane(fullMethod string) bool { return slices.Contains(DataPlaneMethods, fullMethod) }

// TraceFilter is the otelgrpc filter of a replicad client or server: nil
// (every RPC traced) with traceDataPlane, else one that leaves
// DataPlaneMethods out. A call left out still carries the trace context it
// was made in to the other side; it only starts no span of its own.
func TraceFilter(traceDataPlane bool) otelgrpc.Filter {
	if traceDataPlane {
		return nil
	}
	return func(info *stats.RPCTagInfo) bool { return !IsDataPlane(info.FullMethodName) }
}

// OtelOptions are the otelgrpc options of a replicad stats handler.
func OtelOptions(traceDataPlane bool) []otelgrpc.Option {
	if f := TraceFilter(traceDataPlane); f != nil {
		return []otelgrpc.Option{otelgrpc.WithFilter(f)}
	}
	return nil
}
