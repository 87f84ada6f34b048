package service

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Per-RPC request size limits. gRPC's server-wide MaxRecvMsgSize must let a
// Produce with a whole batch through (2x the batch limit plus 1 MiB, at
// least 4 MiB); no other request needs that much. The ones that list up to
// maxPartitionsPerRequest partitions (or ACLs, or MaxMetadataTopics topics)
// get bulkRequestBytes; every
// other one, a topic name and a few numbers, gets smallRequestBytes. Produce
// is bounded by the server-wide limit and, once decoded, by the batch limit
// (validateProduce). A request over its limit is refused ResourceExhausted,
// as gRPC refuses one over the server-wide limit, before its handler (or
// the authorizer) runs.
const (
	bulkRequestBytes  = 4 << 20
	smallRequestBytes = 64 << 10
)

// requestLimits are the methods allowed bulkRequestBytes, or no limit of
// their own (0).
var requestLimits = map[string]int{
	replicadv1.LogService_Produce_FullMethodName:                             0,
	replicadv1.LogService_ProduceStream_FullMethodName:                       0,
	replicadv1.FetchService_Fetch_FullMethodName:                             bulkRequestBytes,
	replicadv1.FetchService_OffsetsForLeaderEpoch_FullMethodName:             bulkRequestBytes,
	replicadv1.ReplicaManagerService_LeaderAndIsr_FullMethodName:             bulkRequestBytes,
	replicadv1.ReplicaManagerService_UpdateMetadata_FullMethodName:           bulkRequestBytes,
	replicadv1.ReplicaManagerService_StopReplica_FullMethodName:              bulkRequestBytes,
	replicadv1.ReplicaManagerService_DescribePartitions_FullMethodName:       bulkRequestBytes,
	replicadv1.ReplicaManagerService_AlterReplicaLogDirs_FullMethodName:      bulkRequestBytes,
	replicadv1.ControllerService_AlterPartition_FullMethodName:               bulkRequestBytes,
	replicadv1.LogService_DeleteRecords_FullMethodName:                       bulkRequestBytes,
	replicadv1.LogService_Metadata_FullMethodName:                            bulkRequestBytes,
	replicadv1.ControllerService_CreateAcls_FullMethodName:                   bulkRequestBytes,
	replicadv1.ControllerService_DeleteAcls_FullMethodName:                   bulkRequestBytes,
	replicadv1.ControllerService_ControlledShutdown_FullMethodName:           smallRequestBytes,
	replicadv1.ReplicaManagerService_CheckpointHighWatermarks_FullMethodName: smallRequestBytes,
}

// requestLimit is fullMethod's limit in bytes; 0: none of its own.
func requestLimit(fullMethod string) int {
	if n, ok := requestLimits[fullMethod]; ok {
		return n
	}
	return smallRequestBytes // health, reflection and the rest
}

// checkRequestSize refuses req when it is over fullMethod's limit.
func checkRequestSize(fullMethod string, req any) error {
	limit := requestLimit(fullMethod)
	if limit == 0 {
		return nil
	}
	m, ok := req.(proto.Message)
	if !ok {
		return nil
	}
	if n := proto.Size(m); n > limit {
		return status.Errorf(codes.ResourceExhausted, "request of %d bytes: over the %d-byte limit of %s", n, limit, fullMethod)
	}
	return nil
}

func requestSizeUnaryInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := checkRequestSize(info.FullMethod, req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// requestSizeStreamInterceptor checks every message a client streams.
func requestSizeStreamInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, sizeCheckedStream{ServerStream: ss, method: info.FullMethod})
}

type sizeCheckedStream struct {
	grpc.ServerStream
	method string
}

func (s sizeCheckedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if err := checkRequestSize(s.method, m); err != nil {
		return err
	}
	return nil
}
