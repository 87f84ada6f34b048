package protoconv

import (
	"time"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Defaults applied when a request leaves a field at zero, which grpcurl users
// do by omitting it.
const (
	// DefaultProduceTimeout is Kafka's request.timeout.ms default: an acks=-1
	// produce without timeout_ms should wait for the ISR, not time out at once.
	DefaultProduceTimeout = 30 * time.Second
	// DefaultConsumeMaxBytes is Kafka's max.partition.fetch.bytes default.
	DefaultConsumeMaxBytes = 1 << 20
)

// This file is the only place that knows both the proto and the core types.
// Requests reach these functions already validated.

// ErrorCodeToProto maps a core error code to the wire enum; both use Kafka's numbers.
func ErrorCodeToProto(c core.ErrorCode) replicadv1.ErrorCode { return replicadv1.ErrorCode(c) }

func TopicPartition(topic string, partition int32) tp.TopicPartition {
	return tp.TopicPartition{Topic: topic, Partition: partition}
}

func PartitionStateFromProto(p *replicadv1.PartitionState) core.PartitionState {
	return core.PartitionState{
		TopicPartition:  TopicPartition(p.GetTopic(), p.GetPartition()),
		ControllerEpoch: p.GetControllerEpoch(),
		Leader:          p.GetLeader(),
		LeaderEpoch:     p.GetLeaderEpoch(),
		ISR:             CloneInt32s(p.GetIsr()),
		PartitionEpoch:  p.GetPartitionEpoch(),
		Replicas:        CloneInt32s(p.GetReplicas()),
		AddingReplicas:  CloneInt32s(p.GetAddingReplicas()),
		IsNew:           p.GetIsNew(),
		TopicID:         p.GetTopicId(),
		// Not cloned: the request is not used after it is converted, and
		// the broker never writes to the map.
		TopicConfigs:       p.GetTopicConfigs(),
		TopicConfigVersion: p.GetTopicConfigVersion(),
	}
}

func PartitionStatesFromProto(ps []*replicadv1.PartitionState) []core.PartitionState {
	out := make([]core.PartitionState, len(ps))
	for i, p := range ps {
		out[i] = PartitionStateFromProto(p)
	}
	return out
}

func BrokersFromProto(bs []*replicadv1.Broker) []core.Broker {
	out := make([]core.Broker, len(bs))
	for i, b := range bs {
		out[i] = core.Broker{ID: b.GetId(), Host: b.GetHost(), Port: b.GetPort(), Epoch: b.GetBrokerEpoch()}
	}
	return out
}

func LeaderAndIsrFromProto(req *replicadv1.LeaderAndIsrRequest) core.LeaderAndIsrRequest {
	return core.LeaderAndIsrRequest{
		ControllerID:    req.GetControllerId(),
		ControllerEpoch: req.GetControllerEpoch(),
		BrokerEpoch:     req.GetBrokerEpoch(),
		PartitionStates: PartitionStatesFromProto(req.GetPartitionStates()),
		LiveLeaders:     BrokersFromProto(req.GetLiveLeaders()),
	}
}

func PartitionErrorsToProto(errs []core.PartitionError) []*replicadv1.PartitionError {
	out := make([]*replicadv1.PartitionError, len(errs))
	for i, e := range errs {
		out[i] = &replicadv1.PartitionError{
			Topic:     e.TopicPartition.Topic,
			Partition: e.TopicPartition.Partition,
			ErrorCode: ErrorCodeToProto(e.Error),
		}
	}
	return out
}

func LeaderAndIsrToProto(resp core.LeaderAndIsrResponse) *replicadv1.LeaderAndIsrResponse {
	return &replicadv1.LeaderAndIsrResponse{
		ErrorCode:       ErrorCodeToProto(resp.Error),
		PartitionErrors: PartitionErrorsToProto(resp.PartitionErrors),
	}
}

func UpdateMetadataFromProto(req *replicadv1.UpdateMetadataRequest) core.UpdateMetadataRequest {
	out := core.UpdateMetadataRequest{
		ControllerID:    req.GetControllerId(),
		ControllerEpoch: req.GetControllerEpoch(),
		BrokerEpoch:     req.GetBrokerEpoch(),
		LiveBrokers:     BrokersFromProto(req.GetLiveBrokers()),
		PartitionStates: PartitionStatesFromProto(req.GetPartitionStates()),
	}
	if req.GetReplicationThrottlePresent() {
		out.Throttle = &core.ReplicationThrottle{BytesPerSec: req.GetReplicationThrottleBytesPerSec(), Version: req.GetReplicationThrottleVersion()}
	}
	return out
}

func StopReplicaFromProto(req *replicadv1.StopReplicaRequest) core.StopReplicaRequest {
	parts := make([]core.StopReplicaPartition, len(req.GetPartitions()))
	for i, p := range req.GetPartitions() {
		parts[i] = core.StopReplicaPartition{
			TopicPartition: TopicPartition(p.GetTopic(), p.GetPartition()),
			LeaderEpoch:    p.GetLeaderEpoch(),
			Delete:         p.GetDeletePartition(),
			TopicID:        p.GetTopicId(),
		}
	}
	return core.StopReplicaRequest{
		ControllerID:    req.GetControllerId(),
		ControllerEpoch: req.GetControllerEpoch(),
		BrokerEpoch:     req.GetBrokerEpoch(),
		Partitions:      parts,
	}
}

func StopReplicaToProto(resp core.StopReplicaResponse) *replicadv1.StopReplicaResponse {
	return &replicadv1.StopReplicaResponse{
		ErrorCode:       ErrorCodeToProto(resp.Error),
		PartitionErrors: PartitionErrorsToProto(resp.PartitionErrors),
	}
}

// CheckpointToProto reports each dir; the top-level code is the first dir's
// failure, so a caller checking one field still notices a failed dir.
func CheckpointToProto(dirs []core.DirCheckpoint) *replicadv1.CheckpointHighWatermarksResponse {
	resp := &replicadv1.CheckpointHighWatermarksResponse{}
	for _, d := range dirs {
		if d.Error != core.ErrNone && resp.ErrorCode == replicadv1.ErrorCode_ERROR_CODE_NONE {
			resp.ErrorCode = ErrorCodeToProto(d.Error)
		}
		resp.LogDirs = append(resp.LogDirs, &replicadv1.LogDirCheckpoint{
			LogDir:     d.Dir,
			Partitions: int32(d.Partitions),
			ErrorCode:  ErrorCodeToProto(d.Error),
		})
	}
	return resp
}

func RoleToProto(r core.Role) replicadv1.ReplicaRole {
	switch r {
	case core.RoleLeader:
		return replicadv1.ReplicaRole_REPLICA_ROLE_LEADER
	case core.RoleFollower:
		return replicadv1.ReplicaRole_REPLICA_ROLE_FOLLOWER
	case core.RoleOffline:
		return replicadv1.ReplicaRole_REPLICA_ROLE_OFFLINE
	default:
		return replicadv1.ReplicaRole_REPLICA_ROLE_UNSPECIFIED
	}
}

func DescribeToProto(d core.Description) *replicadv1.DescribePartitionsResponse {
	resp := &replicadv1.DescribePartitionsResponse{
		BrokerId:        d.BrokerID,
		ControllerEpoch: d.ControllerEpoch,

		LastRetentionCheckMs: unixMs(d.LastRetentionCheck),
		NextRetentionCheckMs: unixMs(d.NextRetentionCheck),
	}
	for _, p := range d.Partitions {
		resp.Partitions = append(resp.Partitions, &replicadv1.PartitionDescription{
			Topic:           p.TopicPartition.Topic,
			Partition:       p.TopicPartition.Partition,
			Role:            RoleToProto(p.Role),
			Leader:          p.Leader,
			LeaderEpoch:     p.LeaderEpoch,
			PartitionEpoch:  p.PartitionEpoch,
			Replicas:        CloneInt32s(p.Replicas),
			Isr:             CloneInt32s(p.ISR),
			HighWatermark:   p.HighWatermark,
			LogEndOffset:    p.LogEndOffset,
			LogStartOffset:  p.LogStartOffset,
			LogDir:          p.LogDir,
			ControllerEpoch: p.ControllerEpoch,
			FutureLogDir:    p.FutureLogDir,
			TopicId:         p.TopicID,
			DamagedOffset:   p.DamagedOffset,

			TopicConfig:        TopicConfigToProto(p.TopicConfig),
			TopicConfigVersion: p.TopicConfigVersion,
			ProducerCount:      int32(p.ProducerCount),
			Producers:          ProducersToProto(p.Producers),
		})
	}
	for _, dir := range d.LogDirs {
		resp.LogDirs = append(resp.LogDirs, &replicadv1.LogDirDescription{
			Path:           dir.Path,
			Online:         dir.Online,
			PartitionCount: int32(dir.PartitionCount),
		})
	}
	return resp
}

// retentionRole is the replica's role at a retention check: none when no
// replica was found.
func retentionRole(r core.RetentionResult) replicadv1.ReplicaRole {
	switch {
	case r.LogStartBefore < 0:
		return replicadv1.ReplicaRole_REPLICA_ROLE_UNSPECIFIED
	case r.Leader:
		return replicadv1.ReplicaRole_REPLICA_ROLE_LEADER
	default:
		return replicadv1.ReplicaRole_REPLICA_ROLE_FOLLOWER
	}
}

// unixMs is t in Unix milliseconds, 0 for the zero time (not yet).
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// RetentionToProto is RunRetention's answer.
func RetentionToProto(rr core.RetentionResponse) *replicadv1.RunRetentionResponse {
	resp := &replicadv1.RunRetentionResponse{BrokerId: rr.BrokerID}
	for _, r := range rr.Results {
		resp.Results = append(resp.Results, &replicadv1.RetentionResult{
			Topic:                r.TopicPartition.Topic,
			Partition:            r.TopicPartition.Partition,
			ErrorCode:            ErrorCodeToProto(r.Error),
			ErrorMessage:         r.Message,
			LogStartOffsetBefore: r.LogStartBefore,
			LogStartOffsetAfter:  r.LogStartAfter,
			DeletedSegments:      int32(r.DeletedSegments),
			DeletedBytes:         r.DeletedBytes,
			Reason:               r.Reason,
			Role:                 retentionRole(r),
		})
	}
	return resp
}

func ProducersToProto(ps []core.ProducerInfo) []*replicadv1.ProducerStateDescription {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*replicadv1.ProducerStateDescription, len(ps))
	for i, p := range ps {
		out[i] = &replicadv1.ProducerStateDescription{ProducerId: p.ID, ProducerEpoch: int32(p.Epoch),
			LastSequence: p.LastSequence, LastOffset: p.LastOffset, LastTimestampMs: p.LastTimestampMs}
	}
	return out
}

func RecordsFromProto(rs []*replicadv1.Record) []record.Record {
	out := make([]record.Record, len(rs))
	for i, r := range rs {
		out[i] = record.Record{Key: r.GetKey(), Value: r.GetValue(), Headers: HeadersFromProto(r.GetHeaders())}
	}
	return out
}

func HeadersFromProto(hs []*replicadv1.Header) []record.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]record.Header, len(hs))
	for i, h := range hs {
		out[i] = record.Header{Key: h.GetKey(), Value: h.GetValue()}
	}
	return out
}

func HeadersToProto(hs []record.Header) []*replicadv1.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]*replicadv1.Header, len(hs))
	for i, h := range hs {
		out[i] = &replicadv1.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// ProduceFromProto builds the core request around the batch validation
// encoded (the size check needed it).
func ProduceFromProto(req *replicadv1.ProduceRequest, batch record.Batch) core.ProduceRequest {
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout == 0 {
		timeout = DefaultProduceTimeout
	}
	return core.ProduceRequest{
		TopicPartition: TopicPartition(req.GetTopic(), req.GetPartition()),
		Acks:           int(req.GetAcks()),
		Timeout:        timeout,
		Batch:          batch,
		Producer:       batch.Producer(),
	}
}

func ProduceToProto(res core.ProduceResult) *replicadv1.ProduceResponse {
	return &replicadv1.ProduceResponse{
		ErrorCode:     ErrorCodeToProto(res.Error),
		BaseOffset:    res.BaseOffset,
		HighWatermark: res.HighWatermark,
		ErrorMessage:  res.Message,
		Duplicate:     res.Duplicate,
	}
}

func ConsumeFromProto(req *replicadv1.ConsumeRequest) core.ConsumeRequest {
	maxBytes := int(req.GetMaxBytes())
	if maxBytes == 0 {
		maxBytes = DefaultConsumeMaxBytes
	}
	return core.ConsumeRequest{
		TopicPartition: TopicPartition(req.GetTopic(), req.GetPartition()),
		Offset:         req.GetOffset(),
		MaxBytes:       maxBytes,
		MinBytes:       int(req.GetMinBytes()),
		MaxWait:        time.Duration(req.GetMaxWaitMs()) * time.Millisecond,
	}
}

func ConsumeToProto(res core.ConsumeResult) *replicadv1.ConsumeResponse {
	resp := &replicadv1.ConsumeResponse{
		ErrorCode:      ErrorCodeToProto(res.Error),
		HighWatermark:  res.HighWatermark,
		LogStartOffset: res.LogStartOffset,
		NextOffset:     res.NextOffset,
	}
	if len(res.Records) > 0 {
		resp.Records = make([]*replicadv1.ConsumedRecord, len(res.Records))
	}
	for i, r := range res.Records {
		resp.Records[i] = &replicadv1.ConsumedRecord{
			Offset:      r.Offset,
			LeaderEpoch: r.LeaderEpoch,
			Key:         r.Key,
			Value:       r.Value,
			TimestampMs: r.TimestampMs,
			Headers:     HeadersToProto(r.Headers),
			// A plain batch's records read 0, 0, 0 (Record's zero
			// producer fields), which cost nothing on the wire.
			ProducerId:    r.ProducerID,
			ProducerEpoch: int32(r.ProducerEpoch),
			Sequence:      r.Sequence,
		}
	}
	return resp
}

// CloneInt32s copies a slice so core never aliases a proto message's memory.
func CloneInt32s(s []int32) []int32 {
	if s == nil {
		return nil
	}
	return append([]int32(nil), s...)
}

// FetchRequestFromProto translates a follower's fetch for the replica
// manager; the alter-log-dirs fetchers' local source uses it too.
func FetchRequestFromProto(req *replicadv1.FetchRequest) core.FetchRequest {
	out := FetchRequestHeaderFromProto(req)
	out.Partitions = make([]core.FetchPartition, len(req.GetPartitions()))
	for i, p := range req.GetPartitions() {
		out.Partitions[i] = FetchPartitionFromProto(p)
	}
	return out
}

// FetchRequestHeaderFromProto is a fetch's fields but its partitions.
func FetchRequestHeaderFromProto(req *replicadv1.FetchRequest) core.FetchRequest {
	return core.FetchRequest{
		ReplicaID:   req.GetReplicaId(),
		BrokerEpoch: req.GetBrokerEpoch(),
		MaxWait:     time.Duration(req.GetMaxWaitMs()) * time.Millisecond,
		MinBytes:    int(req.GetMinBytes()),
		MaxBytes:    int(req.GetMaxBytes()),
	}
}

func FetchPartitionFromProto(p *replicadv1.FetchPartition) core.FetchPartition {
	return core.FetchPartition{
		TopicPartition:     TopicPartition(p.GetTopic(), p.GetPartition()),
		FetchOffset:        p.GetFetchOffset(),
		CurrentLeaderEpoch: p.GetCurrentLeaderEpoch(),
		LastFetchedEpoch:   p.GetLastFetchedEpoch(),
		LogStartOffset:     p.GetLogStartOffset(),
		TopicID:            p.GetTopicId(),
	}
}

// FetchResponseToProto passes the records through as read: they are the stored
// batches, which the follower appends without re-encoding.
func FetchResponseToProto(correlationID int64, resp core.FetchResponse) *replicadv1.FetchResponse {
	out := &replicadv1.FetchResponse{CorrelationId: correlationID, Partitions: make([]*replicadv1.FetchPartitionResult, len(resp.Partitions))}
	for i := range resp.Partitions {
		out.Partitions[i] = FetchResultToProto(&resp.Partitions[i])
	}
	return out
}

func FetchResultToProto(r *core.FetchPartitionResult) *replicadv1.FetchPartitionResult {
	pr := &replicadv1.FetchPartitionResult{
		Topic:          r.TopicPartition.Topic,
		Partition:      r.TopicPartition.Partition,
		ErrorCode:      ErrorCodeToProto(r.Error),
		HighWatermark:  r.HighWatermark,
		LogStartOffset: r.LogStartOffset,
		LogEndOffset:   r.LogEndOffset,
		Records:        r.Records,
	}
	if d := r.DivergingEpoch; d != nil {
		pr.DivergingEpoch = &replicadv1.EpochEndOffset{Epoch: d.Epoch, EndOffset: d.EndOffset}
	}
	return pr
}

func OffsetsForLeaderEpochFromProto(req *replicadv1.OffsetsForLeaderEpochRequest) core.OffsetsForLeaderEpochRequest {
	out := core.OffsetsForLeaderEpochRequest{ReplicaID: req.GetReplicaId(),
		Partitions: make([]core.OffsetForLeaderEpochPartition, len(req.GetPartitions()))}
	for i, p := range req.GetPartitions() {
		out.Partitions[i] = core.OffsetForLeaderEpochPartition{
			TopicPartition:     TopicPartition(p.GetTopic(), p.GetPartition()),
			CurrentLeaderEpoch: p.GetCurrentLeaderEpoch(),
			LeaderEpoch:        p.GetLeaderEpoch(),
		}
	}
	return out
}

func OffsetsForLeaderEpochToProto(resp core.OffsetsForLeaderEpochResponse) *replicadv1.OffsetsForLeaderEpochResponse {
	out := &replicadv1.OffsetsForLeaderEpochResponse{Partitions: make([]*replicadv1.OffsetForLeaderEpochResult, len(resp.Partitions))}
	for i, r := range resp.Partitions {
		out.Partitions[i] = &replicadv1.OffsetForLeaderEpochResult{
			Topic:       r.TopicPartition.Topic,
			Partition:   r.TopicPartition.Partition,
			ErrorCode:   ErrorCodeToProto(r.Error),
			LeaderEpoch: r.LeaderEpoch,
			EndOffset:   r.EndOffset,
		}
	}
	return out
}

func AlterReplicaLogDirsFromProto(req *replicadv1.AlterReplicaLogDirsRequest) []core.AlterReplicaLogDir {
	out := make([]core.AlterReplicaLogDir, len(req.GetPartitions()))
	for i, p := range req.GetPartitions() {
		out[i] = core.AlterReplicaLogDir{TopicPartition: TopicPartition(p.GetTopic(), p.GetPartition()), LogDir: p.GetLogDir()}
	}
	return out
}

// TopicConfigToProto is every key of a topic config with its value.
func TopicConfigToProto(c topicconfig.Config) map[string]string {
	out := make(map[string]string, len(topicconfig.Keys()))
	for _, k := range topicconfig.Keys() {
		out[k] = c.Value(k)
	}
	return out
}
