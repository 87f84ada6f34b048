package service

import (
	"time"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// This file is the only place that knows both the proto and the core types.
// Requests reach these functions already validated.

// errorCodeToProto maps a core error code to the wire enum; both use Kafka's numbers.
func errorCodeToProto(c core.ErrorCode) replicadv1.ErrorCode { return replicadv1.ErrorCode(c) }

func topicPartition(topic string, partition int32) tp.TopicPartition {
	return tp.TopicPartition{Topic: topic, Partition: partition}
}

func partitionStateFromProto(p *replicadv1.PartitionState) core.PartitionState {
	return core.PartitionState{
		TopicPartition:  topicPartition(p.GetTopic(), p.GetPartition()),
		ControllerEpoch: p.GetControllerEpoch(),
		Leader:          p.GetLeader(),
		LeaderEpoch:     p.GetLeaderEpoch(),
		ISR:             cloneInt32s(p.GetIsr()),
		PartitionEpoch:  p.GetPartitionEpoch(),
		Replicas:        cloneInt32s(p.GetReplicas()),
		AddingReplicas:  cloneInt32s(p.GetAddingReplicas()),
		IsNew:           p.GetIsNew(),
		TopicID:         p.GetTopicId(),
		// Not cloned: the request is not used after it is converted, and
		// the broker never writes to the map.
		TopicConfigs:       p.GetTopicConfigs(),
		TopicConfigVersion: p.GetTopicConfigVersion(),
	}
}

func partitionStatesFromProto(ps []*replicadv1.PartitionState) []core.PartitionState {
	out := make([]core.PartitionState, len(ps))
	for i, p := range ps {
		out[i] = partitionStateFromProto(p)
	}
	return out
}

func brokersFromProto(bs []*replicadv1.Broker) []core.Broker {
	out := make([]core.Broker, len(bs))
	for i, b := range bs {
		out[i] = core.Broker{ID: b.GetId(), Host: b.GetHost(), Port: b.GetPort(), Epoch: b.GetBrokerEpoch()}
	}
	return out
}

func leaderAndIsrFromProto(req *replicadv1.LeaderAndIsrRequest) core.LeaderAndIsrRequest {
	return core.LeaderAndIsrRequest{
		ControllerID:    req.GetControllerId(),
		ControllerEpoch: req.GetControllerEpoch(),
		BrokerEpoch:     req.GetBrokerEpoch(),
		PartitionStates: partitionStatesFromProto(req.GetPartitionStates()),
		LiveLeaders:     brokersFromProto(req.GetLiveLeaders()),
	}
}

func partitionErrorsToProto(errs []core.PartitionError) []*replicadv1.PartitionError {
	out := make([]*replicadv1.PartitionError, len(errs))
	for i, e := range errs {
		out[i] = &replicadv1.PartitionError{
			Topic:     e.TopicPartition.Topic,
			Partition: e.TopicPartition.Partition,
			ErrorCode: errorCodeToProto(e.Error),
		}
	}
	return out
}

func leaderAndIsrToProto(resp core.LeaderAndIsrResponse) *replicadv1.LeaderAndIsrResponse {
	return &replicadv1.LeaderAndIsrResponse{
		ErrorCode:       errorCodeToProto(resp.Error),
		PartitionErrors: partitionErrorsToProto(resp.PartitionErrors),
	}
}

func updateMetadataFromProto(req *replicadv1.UpdateMetadataRequest) core.UpdateMetadataRequest {
	out := core.UpdateMetadataRequest{
		ControllerID:    req.GetControllerId(),
		ControllerEpoch: req.GetControllerEpoch(),
		BrokerEpoch:     req.GetBrokerEpoch(),
		LiveBrokers:     brokersFromProto(req.GetLiveBrokers()),
		PartitionStates: partitionStatesFromProto(req.GetPartitionStates()),
	}
	if req.GetReplicationThrottlePresent() {
		out.Throttle = &core.ReplicationThrottle{BytesPerSec: req.GetReplicationThrottleBytesPerSec(), Version: req.GetReplicationThrottleVersion()}
	}
	return out
}

func stopReplicaFromProto(req *replicadv1.StopReplicaRequest) core.StopReplicaRequest {
	parts := make([]core.StopReplicaPartition, len(req.GetPartitions()))
	for i, p := range req.GetPartitions() {
		parts[i] = core.StopReplicaPartition{
			TopicPartition: topicPartition(p.GetTopic(), p.GetPartition()),
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

func stopReplicaToProto(resp core.StopReplicaResponse) *replicadv1.StopReplicaResponse {
	return &replicadv1.StopReplicaResponse{
		ErrorCode:       errorCodeToProto(resp.Error),
		PartitionErrors: partitionErrorsToProto(resp.PartitionErrors),
	}
}

// checkpointToProto reports each dir; the top-level code is the first dir's
// failure, so a caller checking one field still notices a failed dir.
func checkpointToProto(dirs []core.DirCheckpoint) *replicadv1.CheckpointHighWatermarksResponse {
	resp := &replicadv1.CheckpointHighWatermarksResponse{}
	for _, d := range dirs {
		if d.Error != core.ErrNone && resp.ErrorCode == replicadv1.ErrorCode_ERROR_CODE_NONE {
			resp.ErrorCode = errorCodeToProto(d.Error)
		}
		resp.LogDirs = append(resp.LogDirs, &replicadv1.LogDirCheckpoint{
			LogDir:     d.Dir,
			Partitions: int32(d.Partitions),
			ErrorCode:  errorCodeToProto(d.Error),
		})
	}
	return resp
}

func roleToProto(r core.Role) replicadv1.ReplicaRole {
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

func describeToProto(d core.Description) *replicadv1.DescribePartitionsResponse {
	resp := &replicadv1.DescribePartitionsResponse{
		BrokerId:        d.BrokerID,
		ControllerEpoch: d.ControllerEpoch,
	}
	for _, p := range d.Partitions {
		resp.Partitions = append(resp.Partitions, &replicadv1.PartitionDescription{
			Topic:           p.TopicPartition.Topic,
			Partition:       p.TopicPartition.Partition,
			Role:            roleToProto(p.Role),
			Leader:          p.Leader,
			LeaderEpoch:     p.LeaderEpoch,
			PartitionEpoch:  p.PartitionEpoch,
			Replicas:        cloneInt32s(p.Replicas),
			Isr:             cloneInt32s(p.ISR),
			HighWatermark:   p.HighWatermark,
			LogEndOffset:    p.LogEndOffset,
			LogStartOffset:  p.LogStartOffset,
			LogDir:          p.LogDir,
			ControllerEpoch: p.ControllerEpoch,
			FutureLogDir:    p.FutureLogDir,
			TopicId:         p.TopicID,
			DamagedOffset:   p.DamagedOffset,

			TopicConfig:        topicConfigToProto(p.TopicConfig),
			TopicConfigVersion: p.TopicConfigVersion,
			ProducerCount:      int32(p.ProducerCount),
			Producers:          producersToProto(p.Producers),
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

func producersToProto(ps []core.ProducerInfo) []*replicadv1.ProducerStateDescription {
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

func recordsFromProto(rs []*replicadv1.Record) []record.Record {
	out := make([]record.Record, len(rs))
	for i, r := range rs {
		out[i] = record.Record{Key: r.GetKey(), Value: r.GetValue(), Headers: headersFromProto(r.GetHeaders())}
	}
	return out
}

func headersFromProto(hs []*replicadv1.Header) []record.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]record.Header, len(hs))
	for i, h := range hs {
		out[i] = record.Header{Key: h.GetKey(), Value: h.GetValue()}
	}
	return out
}

func headersToProto(hs []record.Header) []*replicadv1.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]*replicadv1.Header, len(hs))
	for i, h := range hs {
		out[i] = &replicadv1.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// produceFromProto builds the core request around the batch validation
// encoded (the size check needed it).
func produceFromProto(req *replicadv1.ProduceRequest, batch record.Batch) core.ProduceRequest {
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout == 0 {
		timeout = DefaultProduceTimeout
	}
	return core.ProduceRequest{
		TopicPartition: topicPartition(req.GetTopic(), req.GetPartition()),
		Acks:           int(req.GetAcks()),
		Timeout:        timeout,
		Batch:          batch,
		Producer:       batch.Producer(),
	}
}

func produceToProto(res core.ProduceResult) *replicadv1.ProduceResponse {
	return &replicadv1.ProduceResponse{
		ErrorCode:     errorCodeToProto(res.Error),
		BaseOffset:    res.BaseOffset,
		HighWatermark: res.HighWatermark,
		ErrorMessage:  res.Message,
		Duplicate:     res.Duplicate,
	}
}

func consumeFromProto(req *replicadv1.ConsumeRequest) core.ConsumeRequest {
	maxBytes := int(req.GetMaxBytes())
	if maxBytes == 0 {
		maxBytes = DefaultConsumeMaxBytes
	}
	return core.ConsumeRequest{
		TopicPartition: topicPartition(req.GetTopic(), req.GetPartition()),
		Offset:         req.GetOffset(),
		MaxBytes:       maxBytes,
		MinBytes:       int(req.GetMinBytes()),
		MaxWait:        time.Duration(req.GetMaxWaitMs()) * time.Millisecond,
	}
}

func consumeToProto(res core.ConsumeResult) *replicadv1.ConsumeResponse {
	resp := &replicadv1.ConsumeResponse{
		ErrorCode:      errorCodeToProto(res.Error),
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
			Headers:     headersToProto(r.Headers),
			// A plain batch's records read 0, 0, -1 (Record's zero
			// producer fields, and no sequence).
			ProducerId:    r.ProducerID,
			ProducerEpoch: int32(r.ProducerEpoch),
			Sequence:      sequenceOf(r),
		}
	}
	return resp
}

// sequenceOf is a consumed record's sequence number, -1 outside an
// idempotent producer's batch (issued producer IDs start at 1, so a zero
// ProducerID is a plain batch's).
func sequenceOf(r record.Record) int32 {
	if r.ProducerID == 0 {
		return -1
	}
	return r.Sequence
}

// cloneInt32s copies a slice so core never aliases a proto message's memory.
func cloneInt32s(s []int32) []int32 {
	if s == nil {
		return nil
	}
	return append([]int32(nil), s...)
}

// FetchRequestFromProto translates a follower's fetch for the replica
// manager; the alter-log-dirs fetchers' local source uses it too.
func FetchRequestFromProto(req *replicadv1.FetchRequest) core.FetchRequest {
	out := fetchRequestHeaderFromProto(req)
	out.Partitions = make([]core.FetchPartition, len(req.GetPartitions()))
	for i, p := range req.GetPartitions() {
		out.Partitions[i] = fetchPartitionFromProto(p)
	}
	return out
}

// fetchRequestHeaderFromProto is a fetch's fields but its partitions.
func fetchRequestHeaderFromProto(req *replicadv1.FetchRequest) core.FetchRequest {
	return core.FetchRequest{
		ReplicaID:   req.GetReplicaId(),
		BrokerEpoch: req.GetBrokerEpoch(),
		MaxWait:     time.Duration(req.GetMaxWaitMs()) * time.Millisecond,
		MinBytes:    int(req.GetMinBytes()),
		MaxBytes:    int(req.GetMaxBytes()),
	}
}

func fetchPartitionFromProto(p *replicadv1.FetchPartition) core.FetchPartition {
	return core.FetchPartition{
		TopicPartition:     topicPartition(p.GetTopic(), p.GetPartition()),
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
		out.Partitions[i] = fetchResultToProto(&resp.Partitions[i])
	}
	return out
}

func fetchResultToProto(r *core.FetchPartitionResult) *replicadv1.FetchPartitionResult {
	pr := &replicadv1.FetchPartitionResult{
		Topic:          r.TopicPartition.Topic,
		Partition:      r.TopicPartition.Partition,
		ErrorCode:      errorCodeToProto(r.Error),
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

func offsetsForLeaderEpochFromProto(req *replicadv1.OffsetsForLeaderEpochRequest) core.OffsetsForLeaderEpochRequest {
	out := core.OffsetsForLeaderEpochRequest{ReplicaID: req.GetReplicaId(),
		Partitions: make([]core.OffsetForLeaderEpochPartition, len(req.GetPartitions()))}
	for i, p := range req.GetPartitions() {
		out.Partitions[i] = core.OffsetForLeaderEpochPartition{
			TopicPartition:     topicPartition(p.GetTopic(), p.GetPartition()),
			CurrentLeaderEpoch: p.GetCurrentLeaderEpoch(),
			LeaderEpoch:        p.GetLeaderEpoch(),
		}
	}
	return out
}

func offsetsForLeaderEpochToProto(resp core.OffsetsForLeaderEpochResponse) *replicadv1.OffsetsForLeaderEpochResponse {
	out := &replicadv1.OffsetsForLeaderEpochResponse{Partitions: make([]*replicadv1.OffsetForLeaderEpochResult, len(resp.Partitions))}
	for i, r := range resp.Partitions {
		out.Partitions[i] = &replicadv1.OffsetForLeaderEpochResult{
			Topic:       r.TopicPartition.Topic,
			Partition:   r.TopicPartition.Partition,
			ErrorCode:   errorCodeToProto(r.Error),
			LeaderEpoch: r.LeaderEpoch,
			EndOffset:   r.EndOffset,
		}
	}
	return out
}

func alterReplicaLogDirsFromProto(req *replicadv1.AlterReplicaLogDirsRequest) []core.AlterReplicaLogDir {
	out := make([]core.AlterReplicaLogDir, len(req.GetPartitions()))
	for i, p := range req.GetPartitions() {
		out[i] = core.AlterReplicaLogDir{TopicPartition: topicPartition(p.GetTopic(), p.GetPartition()), LogDir: p.GetLogDir()}
	}
	return out
}

// topicConfigToProto is every key of a topic config with its value.
func topicConfigToProto(c topicconfig.Config) map[string]string {
	out := make(map[string]string, len(topicconfig.Keys()))
	for _, k := range topicconfig.Keys() {
		out[k] = c.Value(k)
	}
	return out
}
