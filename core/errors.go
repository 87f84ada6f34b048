package core

// ErrorCode is a protocol outcome, numbered as Kafka numbers its Errors (and as
// replicad.v1.ErrorCode numbers them on the wire).
type ErrorCode int16

// The error codes replicad uses.
const (
	ErrNone                         ErrorCode = 0
	ErrUnknownServerError           ErrorCode = -1
	ErrOffsetOutOfRange             ErrorCode = 1
	ErrCorruptMessage               ErrorCode = 2
	ErrUnknownTopicOrPartition      ErrorCode = 3
	ErrLeaderNotAvailable           ErrorCode = 5
	ErrNotLeaderOrFollower          ErrorCode = 6
	ErrRequestTimedOut              ErrorCode = 7
	ErrBrokerNotAvailable           ErrorCode = 8
	ErrReplicaNotAvailable          ErrorCode = 9
	ErrMessageTooLarge              ErrorCode = 10
	ErrStaleControllerEpoch         ErrorCode = 11
	ErrNotEnoughReplicas            ErrorCode = 19
	ErrNotEnoughReplicasAfterAppend ErrorCode = 20
	ErrInvalidRequest               ErrorCode = 42
	// Idempotent produce (issue 21), Kafka's numbers and meanings.
	ErrOutOfOrderSequenceNumber ErrorCode = 45
	ErrDuplicateSequenceNumber  ErrorCode = 46
	ErrInvalidProducerEpoch     ErrorCode = 47
	ErrUnknownProducerID        ErrorCode = 59
	ErrOperationNotAttempted    ErrorCode = 55
	ErrStorageError             ErrorCode = 56
	ErrLogDirNotFound           ErrorCode = 57
	ErrFencedLeaderEpoch        ErrorCode = 74
	ErrUnknownLeaderEpoch       ErrorCode = 75
	ErrStaleBrokerEpoch         ErrorCode = 77
	ErrInvalidUpdateVersion     ErrorCode = 96
	ErrUnknownTopicID           ErrorCode = 100
	ErrInconsistentTopicID      ErrorCode = 103
	// ErrWillExceedPartitionLimits: a new partition beyond this broker's
	// Config.MaxPartitions (KIP-578's name; replicad's own number).
	ErrWillExceedPartitionLimits ErrorCode = 1000
	// Answers of the controller to AlterPartition, named so logs read well.
	ErrNotController     ErrorCode = 41
	ErrIneligibleReplica ErrorCode = 107
)

var errorNames = map[ErrorCode]string{
	ErrNone:                         "NONE",
	ErrUnknownServerError:           "UNKNOWN_SERVER_ERROR",
	ErrOffsetOutOfRange:             "OFFSET_OUT_OF_RANGE",
	ErrCorruptMessage:               "CORRUPT_MESSAGE",
	ErrUnknownTopicOrPartition:      "UNKNOWN_TOPIC_OR_PARTITION",
	ErrLeaderNotAvailable:           "LEADER_NOT_AVAILABLE",
	ErrNotLeaderOrFollower:          "NOT_LEADER_OR_FOLLOWER",
	ErrRequestTimedOut:              "REQUEST_TIMED_OUT",
	ErrBrokerNotAvailable:           "BROKER_NOT_AVAILABLE",
	ErrReplicaNotAvailable:          "REPLICA_NOT_AVAILABLE",
	ErrMessageTooLarge:              "MESSAGE_TOO_LARGE",
	ErrStaleControllerEpoch:         "STALE_CONTROLLER_EPOCH",
	ErrNotEnoughReplicas:            "NOT_ENOUGH_REPLICAS",
	ErrNotEnoughReplicasAfterAppend: "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
	ErrInvalidRequest:               "INVALID_REQUEST",
	ErrOutOfOrderSequenceNumber:     "OUT_OF_ORDER_SEQUENCE_NUMBER",
	ErrDuplicateSequenceNumber:      "DUPLICATE_SEQUENCE_NUMBER",
	ErrInvalidProducerEpoch:         "INVALID_PRODUCER_EPOCH",
	ErrUnknownProducerID:            "UNKNOWN_PRODUCER_ID",
	ErrOperationNotAttempted:        "OPERATION_NOT_ATTEMPTED",
	ErrStorageError:                 "STORAGE_ERROR",
	ErrLogDirNotFound:               "LOG_DIR_NOT_FOUND",
	ErrFencedLeaderEpoch:            "FENCED_LEADER_EPOCH",
	ErrUnknownLeaderEpoch:           "UNKNOWN_LEADER_EPOCH",
	ErrStaleBrokerEpoch:             "STALE_BROKER_EPOCH",
	ErrInvalidUpdateVersion:         "INVALID_UPDATE_VERSION",
	ErrUnknownTopicID:               "UNKNOWN_TOPIC_ID",
	ErrInconsistentTopicID:          "INCONSISTENT_TOPIC_ID",
	ErrWillExceedPartitionLimits:    "WILL_EXCEED_PARTITION_LIMITS",
	ErrNotController:                "NOT_CONTROLLER",
	ErrIneligibleReplica:            "INELIGIBLE_REPLICA",
}

// String returns Kafka's name for the code.
func (e ErrorCode) String() string {
	if n, ok := errorNames[e]; ok {
		return n
	}
	return "ERROR_CODE(" + itoa(int(e)) + ")"
}

func itoa(i int) string {
	if i < 0 {
		return "-" + itoa(-i)
	}
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
