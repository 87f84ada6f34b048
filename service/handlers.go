package service

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// ReplicaManager is what the handlers need from the broker's replica state
// machine; *core.ReplicaManager implements it.
type ReplicaManager interface {
	BecomeLeaderOrFollower(ctx context.Context, req core.LeaderAndIsrRequest) core.LeaderAndIsrResponse
	UpdateMetadata(ctx context.Context, req core.UpdateMetadataRequest) core.ErrorCode
	StopReplicas(ctx context.Context, req core.StopReplicaRequest) core.StopReplicaResponse
	CheckpointHighWatermarks(ctx context.Context) []core.DirCheckpoint
	Describe(topic string, partition *int32) core.Description
	Produce(ctx context.Context, req core.ProduceRequest) core.ProduceResult
	Consume(ctx context.Context, req core.ConsumeRequest) core.ConsumeResult
	FetchMessages(ctx context.Context, req core.FetchRequest) core.FetchResponse
	OffsetsForLeaderEpoch(ctx context.Context, req core.OffsetsForLeaderEpochRequest) core.OffsetsForLeaderEpochResponse
	AlterReplicaLogDirs(ctx context.Context, reqs []core.AlterReplicaLogDir) []core.PartitionError
	MaxBatchBytes() int
}

var _ ReplicaManager = (*core.ReplicaManager)(nil)

// Defaults applied when a request leaves a field at zero, which grpcurl users
// do by omitting it.
const (
	// DefaultProduceTimeout is Kafka's request.timeout.ms default: an acks=-1
	// produce without timeout_ms should wait for the ISR, not time out at once.
	DefaultProduceTimeout = 30 * time.Second
	// DefaultConsumeMaxBytes is Kafka's max.partition.fetch.bytes default.
	DefaultConsumeMaxBytes = 1 << 20
)

// replicaManagerService serves ReplicaManagerService.
type replicaManagerService struct {
	replicadv1.UnimplementedReplicaManagerServiceServer
	rm ReplicaManager
	// brokerEpoch is the broker's current epoch from its controller
	// registration (0 until registered); nil without a controller.
	brokerEpoch func() int64
}

// checkRegistered refuses, as Unavailable (retried by the controller's
// queue), a controller request that names a broker epoch while this broker
// has not registered yet: until the registration answer arrives the broker
// cannot tell a request for this incarnation from one queued for its
// previous life, which must not make it leader again.
func (s *replicaManagerService) checkRegistered(requestEpoch int64) error {
	if s.brokerEpoch == nil || requestEpoch <= 0 || s.brokerEpoch() > 0 {
		return nil
	}
	return status.Errorf(codes.Unavailable, "broker_epoch %d: this broker has not registered with the controller yet; retry", requestEpoch)
}

func (s *replicaManagerService) LeaderAndIsr(ctx context.Context, req *replicadv1.LeaderAndIsrRequest) (*replicadv1.LeaderAndIsrResponse, error) {
	if err := validateLeaderAndIsr(req); err != nil {
		return nil, err
	}
	if err := s.checkRegistered(req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	return leaderAndIsrToProto(s.rm.BecomeLeaderOrFollower(ctx, leaderAndIsrFromProto(req))), nil
}

func (s *replicaManagerService) UpdateMetadata(ctx context.Context, req *replicadv1.UpdateMetadataRequest) (*replicadv1.UpdateMetadataResponse, error) {
	if err := validateUpdateMetadata(req); err != nil {
		return nil, err
	}
	if err := s.checkRegistered(req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	code := s.rm.UpdateMetadata(ctx, updateMetadataFromProto(req))
	return &replicadv1.UpdateMetadataResponse{ErrorCode: errorCodeToProto(code)}, nil
}

func (s *replicaManagerService) StopReplica(ctx context.Context, req *replicadv1.StopReplicaRequest) (*replicadv1.StopReplicaResponse, error) {
	if err := validateStopReplica(req); err != nil {
		return nil, err
	}
	if err := s.checkRegistered(req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	return stopReplicaToProto(s.rm.StopReplicas(ctx, stopReplicaFromProto(req))), nil
}

func (s *replicaManagerService) CheckpointHighWatermarks(ctx context.Context, _ *replicadv1.CheckpointHighWatermarksRequest) (*replicadv1.CheckpointHighWatermarksResponse, error) {
	return checkpointToProto(s.rm.CheckpointHighWatermarks(ctx)), nil
}

func (s *replicaManagerService) DescribePartitions(_ context.Context, req *replicadv1.DescribePartitionsRequest) (*replicadv1.DescribePartitionsResponse, error) {
	if err := validateDescribe(req); err != nil {
		return nil, err
	}
	var partition *int32
	if req.Partition != nil {
		p := req.GetPartition()
		partition = &p
	}
	return describeToProto(s.rm.Describe(req.GetTopic(), partition)), nil
}

// AlterReplicaLogDirs starts moving replicas between this broker's log dirs;
// the answer carries one error code per partition, in request order, and the
// move goes on after it (DescribePartitions shows future_log_dir until done).
func (s *replicaManagerService) AlterReplicaLogDirs(ctx context.Context, req *replicadv1.AlterReplicaLogDirsRequest) (*replicadv1.AlterReplicaLogDirsResponse, error) {
	if err := validateAlterReplicaLogDirs(req); err != nil {
		return nil, err
	}
	errs := s.rm.AlterReplicaLogDirs(ctx, alterReplicaLogDirsFromProto(req))
	return &replicadv1.AlterReplicaLogDirsResponse{PartitionErrors: partitionErrorsToProto(errs)}, nil
}

// logService serves LogService.
type logService struct {
	replicadv1.UnimplementedLogServiceServer
	rm  ReplicaManager
	now func() time.Time
}

func (s *logService) Produce(ctx context.Context, req *replicadv1.ProduceRequest) (*replicadv1.ProduceResponse, error) {
	batch, err := validateProduce(req, s.rm.MaxBatchBytes(), s.now().UnixMilli())
	if err != nil {
		return nil, err
	}
	return produceToProto(s.rm.Produce(ctx, produceFromProto(req, batch))), nil
}

func (s *logService) Consume(ctx context.Context, req *replicadv1.ConsumeRequest) (*replicadv1.ConsumeResponse, error) {
	if err := validateConsume(req); err != nil {
		return nil, err
	}
	return consumeToProto(s.rm.Consume(ctx, consumeFromProto(req))), nil
}

// controllerService is registered so reflection lists it; the controller
// implements it later.
type controllerService struct {
	replicadv1.UnimplementedControllerServiceServer
}
