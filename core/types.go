package core

import (
	"strconv"
	"strings"
	"time"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/core/tp"
)

// NoEpoch is a leader epoch that matches any (StopReplica without an epoch).
const NoEpoch int32 = -1

// Broker is a broker's id and the endpoint of its gRPC services.
type Broker struct {
	ID   int32
	Host string
	Port int32
	// Epoch is the broker's registration epoch as the controller knows it;
	// 0 when unknown (standalone). Fetches are fenced against it.
	Epoch int64
}

// Addr is host:port, an IPv6 host in brackets, as net.JoinHostPort writes
// it: core does not import the network packages (tests/layering checks it).
func (b Broker) Addr() string {
	port := strconv.Itoa(int(b.Port))
	if strings.Contains(b.Host, ":") {
		return "[" + b.Host + "]:" + port
	}
	return b.Host + ":" + port
}

// PartitionState is the controller's decision for one partition (Kafka's
// LeaderAndIsrPartitionState). PartitionEpoch is the seed's zkVersion.
type PartitionState struct {
	TopicPartition  tp.TopicPartition
	ControllerEpoch int32
	Leader          int32
	LeaderEpoch     int32
	ISR             []int32
	PartitionEpoch  int32
	Replicas        []int32
	// AddingReplicas are the replicas a reassignment in flight adds (a
	// subset of Replicas), the only ones the leader's replication throttle
	// holds back (throttle.go).
	AddingReplicas []int32
	IsNew          bool
	// TopicID is the topic's identity (KIP-516), "" when the sender did not
	// say: a log of another topic ID is never reused for the partition.
	TopicID string
	// TopicConfigs are the topic's config overrides (topicconfig's keys),
	// at TopicConfigVersion; version 0: not told, the partition keeps what
	// it holds.
	TopicConfigs       map[string]string
	TopicConfigVersion int64
}

// LeaderAndIsrRequest tells a broker what to lead and follow.
type LeaderAndIsrRequest struct {
	ControllerID    int32
	ControllerEpoch int32
	BrokerEpoch     int64
	PartitionStates []PartitionState
	LiveLeaders     []Broker
}

// PartitionError is one partition's outcome.
type PartitionError struct {
	TopicPartition tp.TopicPartition
	Error          ErrorCode
}

// LeaderAndIsrResponse lists every partition's outcome, in request order.
type LeaderAndIsrResponse struct {
	Error           ErrorCode
	PartitionErrors []PartitionError
}

// UpdateMetadataRequest replaces the broker's list of live brokers.
type UpdateMetadataRequest struct {
	ControllerID    int32
	ControllerEpoch int32
	BrokerEpoch     int64
	LiveBrokers     []Broker
	PartitionStates []PartitionState
	// Throttle is the replication throttle, nil when the request has none
	// (the broker keeps the one it has).
	Throttle *ReplicationThrottle
}

// StopReplicaPartition names one partition to stop.
type StopReplicaPartition struct {
	TopicPartition tp.TopicPartition
	LeaderEpoch    int32 // NoEpoch: any
	Delete         bool
	// TopicID, when set, stops the replica only if it is of this topic ID.
	TopicID string
}

// StopReplicaRequest stops replicas (and deletes them with Delete).
type StopReplicaRequest struct {
	ControllerID    int32
	ControllerEpoch int32
	BrokerEpoch     int64
	Partitions      []StopReplicaPartition
}

// StopReplicaResponse lists every partition's outcome.
type StopReplicaResponse struct {
	Error           ErrorCode
	PartitionErrors []PartitionError
}

// DirCheckpoint is the outcome of writing one log dir's HW checkpoint.
type DirCheckpoint struct {
	Dir        string
	Partitions int
	Error      ErrorCode
}

// Role is what a hosted replica is.
type Role int

// Roles.
const (
	RoleUnspecified Role = iota
	RoleLeader
	RoleFollower
	RoleOffline
)

func (r Role) String() string {
	return [...]string{"unspecified", "leader", "follower", "offline"}[r]
}

// PartitionInfo describes one hosted replica.
type PartitionInfo struct {
	TopicPartition  tp.TopicPartition
	Role            Role
	Leader          int32
	LeaderEpoch     int32
	PartitionEpoch  int32
	ControllerEpoch int32
	Replicas        []int32
	ISR             []int32
	HighWatermark   int64
	LogEndOffset    int64
	LogStartOffset  int64
	LogDir          string
	FutureLogDir    string
	TopicID         string
	// DamagedOffset is where the log's sound part ends when it opened
	// damaged below its recovery point (log.Damaged); nil for a sound log.
	DamagedOffset *int64
	// TopicConfig is the topic config in effect, at the overrides'
	// TopicConfigVersion (0: the broker's defaults).
	TopicConfig        topicconfig.Config
	TopicConfigVersion int64
	// ProducerCount is the idempotent producers this replica holds state
	// for; Producers up to MaxDescribedProducers of them, the last
	// appended first (issue 21).
	ProducerCount int
	Producers     []ProducerInfo
}

// ProducerInfo is one idempotent producer's state on a partition: its ID
// and epoch, its last record's sequence and offset, and its last batch's
// max timestamp, from which it expires.
type ProducerInfo = log.ProducerInfo

// LogDirInfo describes one log dir.
type LogDirInfo struct {
	Path           string
	Online         bool
	PartitionCount int
}

// Description is DescribePartitions' answer.
type Description struct {
	BrokerID        int32
	ControllerEpoch int32
	Partitions      []PartitionInfo
	LogDirs         []LogDirInfo
	// LastRetentionCheck and NextRetentionCheck are the periodic
	// retention check's last run and next one (zero: not yet).
	LastRetentionCheck, NextRetentionCheck time.Time
}

// Acks values of a produce request.
const (
	AcksNone   = 0
	AcksLeader = 1
	AcksAll    = -1
)

// ProduceRequest appends records to a partition this broker leads.
type ProduceRequest struct {
	TopicPartition tp.TopicPartition
	Acks           int
	Timeout        time.Duration
	// Records to append, or Batch when they are already encoded (the
	// service layer encodes them to check the size limit).
	Records []record.Record
	Batch   record.Batch
	// Producer is the idempotent producer's ID, epoch and base sequence
	// (issue 21); record.NoProducer (or a zero ID) for a plain produce.
	// When Batch is set it carries the same fields (record.BuildProducer).
	Producer record.Producer
}

// ProduceResult is the outcome of a produce.
type ProduceResult struct {
	Error         ErrorCode
	BaseOffset    int64
	HighWatermark int64
	Message       string
	// Duplicate: an idempotent retry of a batch the log already holds.
	// Nothing was appended; BaseOffset is the original batch's.
	Duplicate bool
}

// ConsumeRequest reads committed records (below the HW).
type ConsumeRequest struct {
	TopicPartition tp.TopicPartition
	Offset         int64
	MaxBytes       int
	MinBytes       int
	MaxWait        time.Duration
}

// ConsumeResult holds the records read.
type ConsumeResult struct {
	Error          ErrorCode
	HighWatermark  int64
	LogStartOffset int64
	Records        []record.Record
	NextOffset     int64
}

// FetchRequest is a follower's fetch from this broker as leader (Kafka's
// FetchRequest from a replica).
type FetchRequest struct {
	ReplicaID int32
	// BrokerEpoch is the follower broker's epoch; negative when unknown (then
	// it is neither checked nor recorded).
	BrokerEpoch int64
	MaxWait     time.Duration
	MinBytes    int
	// MaxBytes bounds the records of the whole response; 0 means DefaultFetchMaxBytes.
	MaxBytes int
	// HardMaxBytes makes MaxBytes hard (Kafka's hardMaxBytesLimit): a
	// partition whose first batch alone exceeds what is left gets no
	// records, instead of that one batch. Such a response is answered at
	// once, without waiting for MinBytes, so the fetcher can ask again
	// with more. A server uses it to bound what a stream that has not
	// shown it reads its answers can make it hold.
	HardMaxBytes bool
	Partitions   []FetchPartition
}

// FetchPartition is one partition of a FetchRequest.
type FetchPartition struct {
	TopicPartition tp.TopicPartition
	// FetchOffset is the follower's LEO.
	FetchOffset int64
	// CurrentLeaderEpoch is the follower's leader epoch; negative: not checked.
	CurrentLeaderEpoch int32
	// LastFetchedEpoch is the epoch of the follower's last batch; negative
	// when its log is empty (no divergence check).
	LastFetchedEpoch int32
	LogStartOffset   int64
	// TopicID is the follower's topic ID of the partition; "" is not checked.
	TopicID string
}

// EpochEndOffset is the end offset of a leader epoch on the leader.
type EpochEndOffset struct {
	Epoch     int32
	EndOffset int64
}

// FetchPartitionResult is one partition's answer. When DivergingEpoch is set
// Records is empty: the follower truncates first.
type FetchPartitionResult struct {
	TopicPartition tp.TopicPartition
	Error          ErrorCode
	HighWatermark  int64
	LogStartOffset int64
	LogEndOffset   int64
	DivergingEpoch *EpochEndOffset
	// Records are the raw stored batches, for AppendAsFollower.
	Records []byte
}

// FetchResponse holds one result per requested partition, in request order.
type FetchResponse struct {
	Partitions []FetchPartitionResult
}

// OffsetForLeaderEpochPartition asks for the end offset of LeaderEpoch.
type OffsetForLeaderEpochPartition struct {
	TopicPartition     tp.TopicPartition
	CurrentLeaderEpoch int32 // negative: not checked
	LeaderEpoch        int32
}

// OffsetsForLeaderEpochRequest is Kafka's OffsetsForLeaderEpoch request.
type OffsetsForLeaderEpochRequest struct {
	ReplicaID  int32
	Partitions []OffsetForLeaderEpochPartition
}

// OffsetForLeaderEpochResult is the largest epoch <= the requested one and
// its end offset on the leader (-1, -1 when unknown).
type OffsetForLeaderEpochResult struct {
	TopicPartition tp.TopicPartition
	Error          ErrorCode
	LeaderEpoch    int32
	EndOffset      int64
}

// OffsetsForLeaderEpochResponse holds one result per partition, in request order.
type OffsetsForLeaderEpochResponse struct {
	Partitions []OffsetForLeaderEpochResult
}
