package service

import (
	"context"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/telemetry"
	"github.com/replicad/replicad/protoconv"
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
	DeleteRecords(ctx context.Context, req core.DeleteRecordsRequest) core.DeleteRecordsResponse
	RunRetention(ctx context.Context, topic string, partition *int32) core.RetentionResponse
	FetchMessages(ctx context.Context, req core.FetchRequest) core.FetchResponse
	OffsetsForLeaderEpoch(ctx context.Context, req core.OffsetsForLeaderEpochRequest) core.OffsetsForLeaderEpochResponse
	AlterReplicaLogDirs(ctx context.Context, reqs []core.AlterReplicaLogDir) []core.PartitionError
	Metadata(topics []string) core.MetadataView
	MaxBatchBytes() int
	ControllerEpoch() int32
}

var _ ReplicaManager = (*core.ReplicaManager)(nil)

// Defaults applied when a request leaves a field at zero, which grpcurl users
// do by omitting it.
const (
	// DefaultProduceTimeout and DefaultConsumeMaxBytes live with the
	// conversion that applies them.
	DefaultProduceTimeout  = protoconv.DefaultProduceTimeout
	DefaultConsumeMaxBytes = protoconv.DefaultConsumeMaxBytes
	// DefaultDeleteRecordsTimeout is the wait for the ISR of a
	// DeleteRecords without timeout_ms (Kafka's request.timeout.ms).
	DefaultDeleteRecordsTimeout = 30 * time.Second
)

// replicaManagerService serves ReplicaManagerService.
type replicaManagerService struct {
	replicadv1.UnimplementedReplicaManagerServiceServer
	rm ReplicaManager
	// brokerEpoch is the broker's current epoch from its controller
	// registration (0 until registered); nil without a controller.
	brokerEpoch func() int64
	// guard checks the sender of control requests; nil without a controller.
	guard  ControllerGuard
	logger zerolog.Logger
	// onACLs is Options.OnACLs.
	onACLs func(ctrlEpoch int32, version int64, acls []*replicadv1.Acl)
}

// ControllerGuard decides whether a control request comes from the
// controller this broker follows. The broker's session with the controller
// implements it: a request at the epoch of the controller it follows is
// taken; an older one is answered STALE_CONTROLLER_EPOCH; one at a newer
// epoch is taken only once a controller confirms it holds that epoch, and
// NOT_CONTROLLER otherwise, so a hand-made request at an epoch no
// controller holds cannot make a second leader. An error (no controller
// answered) is the caller's to retry.
type ControllerGuard interface {
	CheckController(ctx context.Context, controllerID, controllerEpoch int32) (ControllerCheck, error)
}

// ControllerCheck is a ControllerGuard's verdict on a control request.
type ControllerCheck struct {
	// Code is NONE to take the request, or the code it is refused with.
	Code    replicadv1.ErrorCode
	Message string // why it is refused
	// FollowedEpoch is the epoch of the controller the broker follows,
	// which a refusal reports (the replica manager's may be older).
	FollowedEpoch int32
}

// checkController runs the guard on a control request. Code NONE: go on.
// Otherwise the request is refused whole, and the refusal is logged.
func (s *replicaManagerService) checkController(ctx context.Context, request string, controllerID, controllerEpoch int32) (ControllerCheck, error) {
	if s.guard == nil {
		return ControllerCheck{}, nil
	}
	c, err := s.guard.CheckController(ctx, controllerID, controllerEpoch)
	if err != nil {
		return c, status.Errorf(codes.Unavailable, "%s from controller %d at controller epoch %d: cannot confirm the active controller: %v; retry",
			request, controllerID, controllerEpoch, err)
	}
	if c.Code != replicadv1.ErrorCode_ERROR_CODE_NONE {
		trace.SpanFromContext(ctx).AddEvent("control request refused", trace.WithAttributes(
			attribute.Int("replicad.controller_id", int(controllerID)), attribute.Int("replicad.controller_epoch", int(controllerEpoch)),
			telemetry.ErrorCode(c.Code), attribute.String("replicad.reason", c.Message)))
		s.logger.Warn().Str("logger", "state.change").Str("request", request).Int32("controller_id", controllerID).
			Int32("controller_epoch", controllerEpoch).Str("error_code", telemetry.ErrorCodeName(c.Code)).Str("reason", c.Message).
			Msg("Refusing " + request + " request: it does not come from the controller this broker follows")
	}
	return c, nil
}

// refusedPartitions is every partition's error for a control request the
// guard refused whole.
func refusedPartitions[P interface {
	GetTopic() string
	GetPartition() int32
}](code replicadv1.ErrorCode, ps []P) []*replicadv1.PartitionError {
	out := make([]*replicadv1.PartitionError, len(ps))
	for i, p := range ps {
		out[i] = &replicadv1.PartitionError{Topic: p.GetTopic(), Partition: p.GetPartition(), ErrorCode: code}
	}
	return out
}

// answerEpoch is the controller epoch a control request's answer reports:
// the one this broker follows, which the guard may know before the replica
// manager does.
func (s *replicaManagerService) answerEpoch(c ControllerCheck) int32 {
	return max(s.rm.ControllerEpoch(), c.FollowedEpoch)
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
	c, err := s.checkController(ctx, "LeaderAndIsr", req.GetControllerId(), req.GetControllerEpoch())
	if err != nil {
		return nil, err
	}
	var resp *replicadv1.LeaderAndIsrResponse
	if c.Code != replicadv1.ErrorCode_ERROR_CODE_NONE {
		resp = &replicadv1.LeaderAndIsrResponse{ErrorCode: c.Code, ErrorMessage: c.Message,
			PartitionErrors: refusedPartitions(c.Code, req.GetPartitionStates())}
	} else {
		resp = protoconv.LeaderAndIsrToProto(s.rm.BecomeLeaderOrFollower(ctx, protoconv.LeaderAndIsrFromProto(req)))
	}
	resp.ControllerEpoch = s.answerEpoch(c)
	return resp, nil
}

func (s *replicaManagerService) UpdateMetadata(ctx context.Context, req *replicadv1.UpdateMetadataRequest) (*replicadv1.UpdateMetadataResponse, error) {
	if err := validateUpdateMetadata(req); err != nil {
		return nil, err
	}
	if err := s.checkRegistered(req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	c, err := s.checkController(ctx, "UpdateMetadata", req.GetControllerId(), req.GetControllerEpoch())
	if err != nil {
		return nil, err
	}
	resp := &replicadv1.UpdateMetadataResponse{ErrorCode: c.Code, ErrorMessage: c.Message}
	if c.Code == replicadv1.ErrorCode_ERROR_CODE_NONE {
		resp.ErrorCode = protoconv.ErrorCodeToProto(s.rm.UpdateMetadata(ctx, protoconv.UpdateMetadataFromProto(req)))
		// Only a request the replica manager took (from the controller it
		// follows, not stale): an older controller's set must not replace
		// the current one.
		if resp.ErrorCode == replicadv1.ErrorCode_ERROR_CODE_NONE && req.GetAclsPresent() && s.onACLs != nil {
			s.onACLs(req.GetControllerEpoch(), req.GetAclsVersion(), req.GetAcls())
		}
	}
	resp.ControllerEpoch = s.answerEpoch(c)
	return resp, nil
}

func (s *replicaManagerService) StopReplica(ctx context.Context, req *replicadv1.StopReplicaRequest) (*replicadv1.StopReplicaResponse, error) {
	if err := validateStopReplica(req); err != nil {
		return nil, err
	}
	if err := s.checkRegistered(req.GetBrokerEpoch()); err != nil {
		return nil, err
	}
	c, err := s.checkController(ctx, "StopReplica", req.GetControllerId(), req.GetControllerEpoch())
	if err != nil {
		return nil, err
	}
	var resp *replicadv1.StopReplicaResponse
	if c.Code != replicadv1.ErrorCode_ERROR_CODE_NONE {
		resp = &replicadv1.StopReplicaResponse{ErrorCode: c.Code, ErrorMessage: c.Message,
			PartitionErrors: refusedPartitions(c.Code, req.GetPartitions())}
	} else {
		resp = protoconv.StopReplicaToProto(s.rm.StopReplicas(ctx, protoconv.StopReplicaFromProto(req)))
	}
	resp.ControllerEpoch = s.answerEpoch(c)
	return resp, nil
}

func (s *replicaManagerService) CheckpointHighWatermarks(ctx context.Context, _ *replicadv1.CheckpointHighWatermarksRequest) (*replicadv1.CheckpointHighWatermarksResponse, error) {
	return protoconv.CheckpointToProto(s.rm.CheckpointHighWatermarks(ctx)), nil
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
	return protoconv.DescribeToProto(s.rm.Describe(req.GetTopic(), partition)), nil
}

// RunRetention runs the retention check now for the topic's replicas here
// (leader or follower), as the periodic check would, and answers what it
// deleted per partition.
func (s *replicaManagerService) RunRetention(ctx context.Context, req *replicadv1.RunRetentionRequest) (*replicadv1.RunRetentionResponse, error) {
	if err := validateRunRetention(req); err != nil {
		return nil, err
	}
	var partition *int32
	if req.Partition != nil {
		p := req.GetPartition()
		partition = &p
	}
	return protoconv.RetentionToProto(s.rm.RunRetention(ctx, req.GetTopic(), partition)), nil
}

// AlterReplicaLogDirs starts moving replicas between this broker's log dirs;
// the answer carries one error code per partition, in request order, and the
// move goes on after it (DescribePartitions shows future_log_dir until done).
func (s *replicaManagerService) AlterReplicaLogDirs(ctx context.Context, req *replicadv1.AlterReplicaLogDirsRequest) (*replicadv1.AlterReplicaLogDirsResponse, error) {
	if err := validateAlterReplicaLogDirs(req); err != nil {
		return nil, err
	}
	errs := s.rm.AlterReplicaLogDirs(ctx, protoconv.AlterReplicaLogDirsFromProto(req))
	return &replicadv1.AlterReplicaLogDirsResponse{PartitionErrors: protoconv.PartitionErrorsToProto(errs)}, nil
}

// logService serves LogService.
type logService struct {
	replicadv1.UnimplementedLogServiceServer
	rm     ReplicaManager
	now    func() time.Time
	limits *limiter
	// describeFilter is Options.DescribeFilter.
	describeFilter DescribeFilter
	// draining ends every ProduceStream when the server shuts down (nil:
	// never): a stream never ends on its own.
	draining context.Context
	// tracer, set with --trace-data-plane, makes a span of every request
	// on a ProduceStream; nil makes none.
	tracer trace.Tracer
	// producerIDs is Options.ProducerIDs; logger logs InitProducerId.
	producerIDs ProducerIDs
	logger      zerolog.Logger
}

func (s *logService) Produce(ctx context.Context, req *replicadv1.ProduceRequest) (*replicadv1.ProduceResponse, error) {
	return s.produce(ctx, req)
}

// produce is Produce's work, shared by ProduceStream: a request answers the
// same whichever way it came.
func (s *logService) produce(ctx context.Context, req *replicadv1.ProduceRequest) (*replicadv1.ProduceResponse, error) {
	pp, err := s.startProduce(req)
	if err != nil {
		return nil, err
	}
	return pp.finish(ctx), nil
}

// pendingProduce is a produce appended (or refused) by startProduce and
// answered by finish, holding its share of the delayed-produce limits in
// between.
type pendingProduce struct {
	core    produceWaiter
	release []func()
}

// produceWaiter is a produce appended and waiting: *core.PendingProduce, or
// syncProduce over a ReplicaManager that cannot start one (test fakes).
type produceWaiter interface {
	Wait(ctx context.Context) core.ProduceResult
}

// produceStarter is what core.ReplicaManager offers beyond the interface:
// the append apart from the wait.
type produceStarter interface {
	StartProduce(req core.ProduceRequest) *core.PendingProduce
}

// syncProduce appends and waits in Wait: correct, in order, unpipelined.
type syncProduce struct {
	rm  ReplicaManager
	req core.ProduceRequest
}

func (p syncProduce) Wait(ctx context.Context) core.ProduceResult { return p.rm.Produce(ctx, p.req) }

// startProduce validates req, takes its delayed-produce limits and appends
// it; an error is the gRPC status unary Produce ends with (nothing appended).
func (s *logService) startProduce(req *replicadv1.ProduceRequest) (*pendingProduce, error) {
	batch, err := validateProduce(req, s.rm.MaxBatchBytes(), s.now().UnixMilli())
	if err != nil {
		return nil, err
	}
	pp := &pendingProduce{}
	if req.GetAcks() == -1 {
		// A delayed produce holds its request until the ISR has it:
		// both their number and their bytes are bounded.
		unpark, err := s.limits.park("acks")
		if err != nil {
			return nil, err
		}
		release, err := s.limits.delayProduce(len(batch))
		if err != nil {
			unpark()
			return nil, err
		}
		pp.release = []func(){release, unpark}
	}
	// A panic in the append gives the limits back too.
	ok := false
	defer func() {
		if !ok {
			pp.done()
		}
	}()
	creq := protoconv.ProduceFromProto(req, batch)
	if st, ok := s.rm.(produceStarter); ok {
		pp.core = st.StartProduce(creq)
	} else {
		pp.core = syncProduce{s.rm, creq}
	}
	ok = true
	return pp, nil
}

// finish waits for the produce's acks and answers it.
func (pp *pendingProduce) finish(ctx context.Context) *replicadv1.ProduceResponse {
	defer pp.done()
	return protoconv.ProduceToProto(pp.core.Wait(ctx))
}

func (pp *pendingProduce) done() {
	for _, f := range pp.release {
		f()
	}
	pp.release = nil
}

func (s *logService) Consume(ctx context.Context, req *replicadv1.ConsumeRequest) (*replicadv1.ConsumeResponse, error) {
	if err := validateConsume(req); err != nil {
		return nil, err
	}
	if req.GetMaxWaitMs() > 0 && req.GetMinBytes() > 0 {
		unpark, err := s.limits.park("max_wait_ms")
		if err != nil {
			return nil, err
		}
		defer unpark()
	}
	// What the answer may hold comes from the broker's response budget
	// (capped at core.MaxConsumeBytes), not from max_bytes alone.
	grant := s.limits.consumeBytes(req.GetMaxBytes())
	// gRPC sends the answer after this returns, and says nothing when it
	// is out: the grant is held a while longer, as long as sending it at
	// responseDrainRate takes, so the budget covers most of the send too.
	// Deferred, so a panic (turned into Internal) gives it back as well.
	defer func() { s.limits.giveAfterDrain(grant) }()
	creq := protoconv.ConsumeFromProto(req)
	creq.MaxBytes = int(grant)
	res := s.rm.Consume(ctx, creq)
	// The deferred giveAfterDrain returns what the answer holds.
	grant = s.limits.response.settle(grant, recordBytes(res.Records))
	return protoconv.ConsumeToProto(res), nil
}

func (s *logService) DeleteRecords(ctx context.Context, req *replicadv1.DeleteRecordsRequest) (*replicadv1.DeleteRecordsResponse, error) {
	if err := validateDeleteRecords(req); err != nil {
		return nil, err
	}
	creq := core.DeleteRecordsRequest{Timeout: time.Duration(req.GetTimeoutMs()) * time.Millisecond}
	if creq.Timeout == 0 {
		creq.Timeout = DefaultDeleteRecordsTimeout
	}
	for _, p := range req.GetPartitions() {
		creq.Partitions = append(creq.Partitions, core.DeleteRecordsPartition{
			TopicPartition: protoconv.TopicPartition(p.GetTopic(), p.GetPartition()), Offset: p.GetOffset()})
	}
	res := s.rm.DeleteRecords(ctx, creq)
	resp := &replicadv1.DeleteRecordsResponse{}
	for _, r := range res.Partitions {
		resp.Partitions = append(resp.Partitions, &replicadv1.DeleteRecordsPartitionResult{Topic: r.TopicPartition.Topic,
			Partition: r.TopicPartition.Partition, LowWatermark: r.LowWatermark, ErrorCode: protoconv.ErrorCodeToProto(r.Error)})
	}
	return resp, nil
}

// recordBytes is what records hold in keys, values and headers.
func recordBytes(recs []record.Record) int64 {
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
		for _, h := range r.Headers {
			n += len(h.Key) + len(h.Value)
		}
	}
	return int64(n)
}

// controllerService is registered so reflection lists it; the controller
// implements it later.
type controllerService struct {
	replicadv1.UnimplementedControllerServiceServer
}
