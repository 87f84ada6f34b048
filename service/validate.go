package service

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/protoconv"
)

// Every validator checks a whole request before anything reaches the replica
// manager, so a rejected request changes nothing. Errors name the field by
// its proto path (partition_states[2].isr) so the caller can find it.

// invalid returns the InvalidArgument status for one field.
func invalid(field, format string, args ...any) error {
	return status.Error(codes.InvalidArgument, field+": "+fmt.Sprintf(format, args...))
}

func validateTopic(field, topic string) error {
	if err := tp.ValidateTopic(topic); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

func validatePartition(field string, partition int32) error {
	if partition < 0 {
		return invalid(field, "must not be negative (got %d)", partition)
	}
	return nil
}

// validateDirName refuses a partition whose log dir name ("topic-partition")
// would not fit Linux's 255 bytes: such a partition cannot be hosted, and
// ENAMETOOLONG must not reach a disk, where it would look like a failed dir.
// field names the topic (the partition is checked non-negative before).
func validateDirName(field, topic string, partition int32) error {
	if err := tp.ValidateDirName(tp.TopicPartition{Topic: topic, Partition: partition}); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

func validateNonNegative(field string, v int64) error {
	if v < 0 {
		return invalid(field, "must not be negative (got %d)", v)
	}
	return nil
}

// MaxPartitionsPerRequest bounds the partitions of one LeaderAndIsr,
// UpdateMetadata or StopReplica request: a request is worked through whole,
// holding its partitions' state and answer in memory, and may open a log
// (file descriptors) for each. The controller splits its requests at the
// same number (brokerqueue.DefaultMaxPartitionsPerRequest); a larger request
// is refused with InvalidArgument.
const MaxPartitionsPerRequest = 10_000

// validatePartitionCount refuses a list longer than MaxPartitionsPerRequest.
func validatePartitionCount(field string, n int) error {
	if n > MaxPartitionsPerRequest {
		return invalid(field, "%d partitions, over the limit of %d per request: split the request", n, MaxPartitionsPerRequest)
	}
	return nil
}

// noLeader is the leader id of a partition without a leader (Kafka's LeaderAndIsr.NoLeader).
const noLeader = -1

// partitionEntry is a request entry naming a partition (a proto message
// pointer; the getters are nil-safe).
type partitionEntry interface {
	comparable
	GetTopic() string
	GetPartition() int32
}

// validatePartitionList checks every entry of a list of partitions: not null,
// a legal topic, a non-negative partition, the entry's own fields (check, may
// be nil), and no partition named twice (two entries for one partition in one
// request would race).
func validatePartitionList[E partitionEntry](field string, entries []E, check func(path string, e E) error) error {
	// Every follower fetch comes through here, with every partition its
	// fetcher serves: an entry's path (for the error) is formatted only
	// once the entry is known to be bad, by checking it again with it.
	// With an empty path the checks' own field names (path+".topic")
	// need no allocation.
	var seen map[tp.TopicPartition]int
	if len(entries) > smallPartitionList {
		seen = make(map[tp.TopicPartition]int, len(entries))
	}
	for i, e := range entries {
		if validatePartitionEntry("", e, check) != nil {
			return validatePartitionEntry(fmt.Sprintf("%s[%d]", field, i), e, check)
		}
		t := protoconv.TopicPartition(e.GetTopic(), e.GetPartition())
		j, dup := -1, false
		if seen != nil {
			j, dup = seen[t]
			seen[t] = i
		} else {
			for k := range i {
				if entries[k].GetPartition() == t.Partition && entries[k].GetTopic() == t.Topic {
					j, dup = k, true
					break
				}
			}
		}
		if dup {
			return invalid(fmt.Sprintf("%s[%d]", field, i), "partition %s already appears at %s[%d]", t, field, j)
		}
	}
	return nil
}

// smallPartitionList is the longest list validatePartitionList checks for
// duplicates by comparing entries rather than with a map.
const smallPartitionList = 16

// validatePartitionEntry checks one entry of a partition list; path names it
// in the error.
func validatePartitionEntry[E partitionEntry](path string, e E, check func(path string, e E) error) error {
	var null E
	if e == null {
		return invalid(path, "is null")
	}
	if err := validateTopic(path+".topic", e.GetTopic()); err != nil {
		return err
	}
	if err := validatePartition(path+".partition", e.GetPartition()); err != nil {
		return err
	}
	if err := validateDirName(path+".topic", e.GetTopic(), e.GetPartition()); err != nil {
		return err
	}
	if check != nil {
		return check(path, e)
	}
	return nil
}

// validatePartitionState checks the fields of one controller decision past
// its topic and partition. The leader is one of the replicas, or -1
// (NoLeader), which both UpdateMetadata and LeaderAndIsr carry for a
// partition the controller left without a leader (no ISR member alive).
func validatePartitionState(path string, p *replicadv1.PartitionState) error {
	if err := validateNonNegative(path+".controller_epoch", int64(p.GetControllerEpoch())); err != nil {
		return err
	}
	if err := validateNonNegative(path+".leader_epoch", int64(p.GetLeaderEpoch())); err != nil {
		return err
	}
	if err := validateNonNegative(path+".partition_epoch", int64(p.GetPartitionEpoch())); err != nil {
		return err
	}
	replicas := p.GetReplicas()
	if len(replicas) == 0 {
		return invalid(path+".replicas", "must not be empty")
	}
	inReplicas := make(map[int32]bool, len(replicas))
	for _, r := range replicas {
		if r < 0 {
			return invalid(path+".replicas", "broker id %d is negative", r)
		}
		if inReplicas[r] {
			return invalid(path+".replicas", "broker %d appears twice", r)
		}
		inReplicas[r] = true
	}
	if p.GetLeader() != noLeader && !inReplicas[p.GetLeader()] {
		return invalid(path+".leader", "broker %d is not in replicas %s", p.GetLeader(), tp.JoinIDs(replicas))
	}
	if err := validateTopicID(path+".topic_id", p.GetTopicId()); err != nil {
		return err
	}
	inISR := make(map[int32]bool, len(p.GetIsr()))
	for _, r := range p.GetIsr() {
		if !inReplicas[r] {
			return invalid(path+".isr", "broker %d is not in replicas %s", r, tp.JoinIDs(replicas))
		}
		if inISR[r] {
			return invalid(path+".isr", "broker %d appears twice", r)
		}
		inISR[r] = true
	}
	adding := make(map[int32]bool, len(p.GetAddingReplicas()))
	for _, r := range p.GetAddingReplicas() {
		if !inReplicas[r] {
			return invalid(path+".adding_replicas", "broker %d is not in replicas %s", r, tp.JoinIDs(replicas))
		}
		if adding[r] {
			return invalid(path+".adding_replicas", "broker %d appears twice", r)
		}
		adding[r] = true
	}
	return nil
}

// validatePartitionStates checks a list of controller decisions.
func validatePartitionStates(field string, ps []*replicadv1.PartitionState) error {
	return validatePartitionList(field, ps, func(path string, p *replicadv1.PartitionState) error {
		return validatePartitionState(path, p)
	})
}

func validateBrokers(field string, bs []*replicadv1.Broker) error {
	seen := make(map[int32]bool, len(bs))
	for i, b := range bs {
		path := fmt.Sprintf("%s[%d]", field, i)
		if b == nil {
			return invalid(path, "is null")
		}
		if b.GetId() < 0 {
			return invalid(path+".id", "must not be negative (got %d)", b.GetId())
		}
		if seen[b.GetId()] {
			return invalid(path+".id", "broker %d appears twice", b.GetId())
		}
		seen[b.GetId()] = true
		if b.GetHost() == "" {
			return invalid(path+".host", "must not be empty")
		}
		if b.GetPort() < 1 || b.GetPort() > 65535 {
			return invalid(path+".port", "must be in 1..65535 (got %d)", b.GetPort())
		}
		if err := validateNonNegative(path+".broker_epoch", b.GetBrokerEpoch()); err != nil {
			return err
		}
	}
	return nil
}

func validateController(controllerID, controllerEpoch int32) error {
	if err := validateNonNegative("controller_id", int64(controllerID)); err != nil {
		return err
	}
	return validateNonNegative("controller_epoch", int64(controllerEpoch))
}

func validateLeaderAndIsr(req *replicadv1.LeaderAndIsrRequest) error {
	if err := validateController(req.GetControllerId(), req.GetControllerEpoch()); err != nil {
		return err
	}
	if err := validatePartitionCount("partition_states", len(req.GetPartitionStates())); err != nil {
		return err
	}
	if err := validatePartitionStates("partition_states", req.GetPartitionStates()); err != nil {
		return err
	}
	return validateBrokers("live_leaders", req.GetLiveLeaders())
}

func validateUpdateMetadata(req *replicadv1.UpdateMetadataRequest) error {
	if err := validateController(req.GetControllerId(), req.GetControllerEpoch()); err != nil {
		return err
	}
	if err := validateBrokers("live_brokers", req.GetLiveBrokers()); err != nil {
		return err
	}
	if err := validatePartitionCount("partition_states", len(req.GetPartitionStates())); err != nil {
		return err
	}
	if req.GetReplicationThrottleBytesPerSec() < 0 {
		return invalid("replication_throttle_bytes_per_sec", "must not be negative (got %d)", req.GetReplicationThrottleBytesPerSec())
	}
	return validatePartitionStates("partition_states", req.GetPartitionStates())
}

func validateStopReplica(req *replicadv1.StopReplicaRequest) error {
	if err := validateController(req.GetControllerId(), req.GetControllerEpoch()); err != nil {
		return err
	}
	if err := validatePartitionCount("partitions", len(req.GetPartitions())); err != nil {
		return err
	}
	return validatePartitionList("partitions", req.GetPartitions(), func(path string, p *replicadv1.StopReplicaPartition) error {
		// -1 is the "any epoch" sentinel (core.NoEpoch); below it is nonsense.
		if p.GetLeaderEpoch() < -1 {
			return invalid(path+".leader_epoch", "must be -1 (any) or non-negative (got %d)", p.GetLeaderEpoch())
		}
		return validateTopicID(path+".topic_id", p.GetTopicId())
	})
}

func validateAlterReplicaLogDirs(req *replicadv1.AlterReplicaLogDirsRequest) error {
	if len(req.GetPartitions()) == 0 {
		return invalid("partitions", "must name at least one partition")
	}
	return validatePartitionList("partitions", req.GetPartitions(), func(path string, p *replicadv1.AlterReplicaLogDir) error {
		if !filepath.IsAbs(p.GetLogDir()) {
			return invalid(path+".log_dir", "must be an absolute path (got %q)", p.GetLogDir())
		}
		// The future dir ("topic-partition.<id>-future") is parsed back
		// at start-up, so it cannot be cut short to fit.
		if err := tp.ValidateFutureDirName(tp.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}); err != nil {
			return invalid(path+".topic", "%v", err)
		}
		return nil
	})
}

func validateDescribe(req *replicadv1.DescribePartitionsRequest) error {
	if req.GetTopic() != "" {
		if err := validateTopic("topic", req.GetTopic()); err != nil {
			return err
		}
	}
	if req.Partition != nil {
		if req.GetTopic() == "" {
			return invalid("partition", "needs a topic")
		}
		return validatePartition("partition", req.GetPartition())
	}
	return nil
}

func validateRunRetention(req *replicadv1.RunRetentionRequest) error {
	if req.GetTopic() == "" {
		return invalid("topic", "required: the topic whose retention to check")
	}
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return err
	}
	if req.Partition != nil {
		return validatePartition("partition", req.GetPartition())
	}
	return nil
}

// validateProduce checks the request and returns its records converted, so
// the size check's encoding work is not repeated for the conversion.
// validateProduce checks a produce request and returns its records encoded as one batch.
func validateProduce(req *replicadv1.ProduceRequest, maxBatchBytes int, nowMs int64) (record.Batch, error) {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return nil, err
	}
	if err := validatePartition("partition", req.GetPartition()); err != nil {
		return nil, err
	}
	if err := validateDirName("topic", req.GetTopic(), req.GetPartition()); err != nil {
		return nil, err
	}
	switch req.GetAcks() {
	case -1, 0, 1:
	default:
		return nil, invalid("acks", "must be -1 (all), 0 or 1 (got %d)", req.GetAcks())
	}
	if err := validateNonNegative("timeout_ms", int64(req.GetTimeoutMs())); err != nil {
		return nil, err
	}
	if len(req.GetRecords()) == 0 {
		return nil, invalid("records", "must not be empty")
	}
	for i, r := range req.GetRecords() {
		if r == nil {
			return nil, invalid(fmt.Sprintf("records[%d]", i), "is null")
		}
	}
	prod, err := validateProducer(req)
	if err != nil {
		return nil, err
	}
	// The limit is on the encoded batch, which is what the log stores and
	// followers fetch, so measure exactly that; the batch then goes to the
	// log as it is, encoded once (with the producer fields of an
	// idempotent produce: a v1 batch).
	batch := record.BuildProducer(protoconv.RecordsFromProto(req.GetRecords()), nowMs, prod)
	if n := len(batch); n > maxBatchBytes {
		return nil, invalid("records", "batch is %d bytes encoded, over the limit of %d", n, maxBatchBytes)
	}
	return batch, nil
}

// validateProducer checks a produce request's producer fields (issue 21)
// and returns them: record.NoProducer for a plain produce (producer_id 0).
func validateProducer(req *replicadv1.ProduceRequest) (record.Producer, error) {
	id, epoch, seq := req.GetProducerId(), req.GetProducerEpoch(), req.GetBaseSequence()
	if id < 0 {
		return record.Producer{}, invalid("producer_id", "must not be negative: 0 for a plain produce, or an ID from InitProducerId (got %d)", id)
	}
	if id == 0 {
		if epoch != 0 {
			return record.Producer{}, invalid("producer_epoch", "set without a producer_id (got %d)", epoch)
		}
		if seq != 0 {
			return record.Producer{}, invalid("base_sequence", "set without a producer_id (got %d)", seq)
		}
		return record.NoProducer, nil
	}
	if epoch < 0 || epoch > math.MaxInt16 {
		return record.Producer{}, invalid("producer_epoch", "must be in 0..%d (got %d)", math.MaxInt16, epoch)
	}
	if seq < 0 {
		return record.Producer{}, invalid("base_sequence", "must not be negative (got %d)", seq)
	}
	return record.Producer{ID: id, Epoch: int16(epoch), BaseSequence: seq}, nil
}

// Consume's logical offsets (ConsumeRequest.offset).
const (
	consumeLatest   = -1 // the high watermark
	consumeEarliest = -2 // the log start offset
)

func validateConsume(req *replicadv1.ConsumeRequest) error {
	if err := validateTopic("topic", req.GetTopic()); err != nil {
		return err
	}
	if err := validatePartition("partition", req.GetPartition()); err != nil {
		return err
	}
	if err := validateDirName("topic", req.GetTopic(), req.GetPartition()); err != nil {
		return err
	}
	if o := req.GetOffset(); o < 0 && o != consumeLatest && o != consumeEarliest {
		return invalid("offset", "must not be negative, except -1 (latest: the high watermark) and -2 (earliest: the log start offset) (got %d)", o)
	}
	if err := validateNonNegative("max_bytes", int64(req.GetMaxBytes())); err != nil {
		return err
	}
	if err := validateNonNegative("max_wait_ms", int64(req.GetMaxWaitMs())); err != nil {
		return err
	}
	return validateNonNegative("min_bytes", int64(req.GetMinBytes()))
}

func validateFetch(req *replicadv1.FetchRequest) error {
	if req.GetReplicaId() < 0 {
		return invalid("replica_id", "must not be negative (got %d): only a follower broker fetches", req.GetReplicaId())
	}
	if err := validateNonNegative("max_wait_ms", int64(req.GetMaxWaitMs())); err != nil {
		return err
	}
	if err := validateNonNegative("min_bytes", int64(req.GetMinBytes())); err != nil {
		return err
	}
	if err := validateNonNegative("max_bytes", int64(req.GetMaxBytes())); err != nil {
		return err
	}
	if err := validatePartitionList("partitions", req.GetPartitions(), func(path string, p *replicadv1.FetchPartition) error {
		if err := validateTopicID(path+".topic_id", p.GetTopicId()); err != nil {
			return err
		}
		return validateNonNegative(path+".fetch_offset", p.GetFetchOffset())
	}); err != nil {
		return err
	}
	return validateFetchRemoved(req)
}

// validateFetchRemoved checks a session request's removed partitions: only
// in a session, each once, and none also fetched (it would be ambiguous
// whether the partition stays).
func validateFetchRemoved(req *replicadv1.FetchRequest) error {
	removed := req.GetRemovedPartitions()
	if len(removed) == 0 {
		return nil
	}
	if !req.GetSession() {
		return invalid("removed_partitions", "only a session request (session set) removes partitions")
	}
	if err := validatePartitionList("removed_partitions", removed, nil); err != nil {
		return err
	}
	fetched := make(map[tp.TopicPartition]bool, len(req.GetPartitions()))
	for _, p := range req.GetPartitions() {
		fetched[protoconv.TopicPartition(p.GetTopic(), p.GetPartition())] = true
	}
	for i, r := range removed {
		if t := protoconv.TopicPartition(r.GetTopic(), r.GetPartition()); fetched[t] {
			return invalid(fmt.Sprintf("removed_partitions[%d]", i), "partition %s is also in partitions", t)
		}
	}
	return nil
}

// validateTopicID checks a topic ID field: empty (not given) or Kafka's form.
func validateTopicID(field, id string) error {
	if err := tp.ValidateTopicID(id); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

func validateDeleteRecords(req *replicadv1.DeleteRecordsRequest) error {
	if len(req.GetPartitions()) == 0 {
		return invalid("partitions", "must name at least one partition")
	}
	if err := validatePartitionCount("partitions", len(req.GetPartitions())); err != nil {
		return err
	}
	if t := req.GetTimeoutMs(); t < 0 || time.Duration(t)*time.Millisecond > core.MaxDeleteRecordsTimeout {
		return invalid("timeout_ms", "want 0..%d (got %d)", core.MaxDeleteRecordsTimeout.Milliseconds(), t)
	}
	return validatePartitionList("partitions", req.GetPartitions(), func(path string, p *replicadv1.DeleteRecordsPartition) error {
		if p.GetOffset() < core.DeleteRecordsHighWatermark {
			return invalid(path+".offset", "want an offset, or -1 for the high watermark (got %d)", p.GetOffset())
		}
		return nil
	})
}

// validateOffsetsForLeaderEpoch leaves replica_id alone: tools ask as -1
// (Kafka's consumer id), as they do in Kafka.
func validateOffsetsForLeaderEpoch(req *replicadv1.OffsetsForLeaderEpochRequest) error {
	return validatePartitionList("partitions", req.GetPartitions(), nil)
}
