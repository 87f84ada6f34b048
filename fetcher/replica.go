package fetcher

import (
	"github.com/replicad/replicad/core/epoch"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// Replica is the local follower replica a fetcher writes to. The fetcher
// declares it so that core implements it (with its own bookkeeping around
// truncation, such as checkpointing the recovery point) and tests can use a
// real log through NewLogReplica.
type Replica interface {
	// LeaderEpoch is the partition's current leader epoch as the replica
	// manager knows it; a fetch state with an older epoch is stale.
	LeaderEpoch() int32
	LogStartOffset() int64
	LogEndOffset() int64
	HighWatermark() int64
	// LatestEpoch is the epoch of the last batch held (the lastFetchedEpoch
	// sent to the leader), or -1 when the log has no epoch.
	LatestEpoch() int32
	// EndOffsetForEpoch is the largest epoch <= requested held locally and
	// its end offset, or (-1, -1).
	EndOffsetForEpoch(requested int32) (epoch int32, endOffset int64)
	// EarliestEpoch is the oldest epoch held and the offset it starts at, or
	// (-1, -1) when the replica holds no epoch.
	EarliestEpoch() (epoch int32, startOffset int64)
	// AppendAsFollower appends raw batches fetched from the leader, all or
	// nothing, CRC-checked (errors wrap record.ErrCorrupt on a bad batch).
	AppendAsFollower(records []byte) (log.AppendInfo, error)
	// TruncateTo drops everything at or after offset, trimming the epoch cache.
	TruncateTo(offset int64) error
	// TruncateFullyAndStartAt empties the log and restarts it at offset.
	TruncateFullyAndStartAt(offset int64) error
	// UpdateFollowerHighWatermark sets the HW to min(leaderHW, LEO) and returns it.
	UpdateFollowerHighWatermark(leaderHW int64) int64
	// IncrementLogStartOffset raises the log start to offset (at most the
	// HW), deleting the segments below it; it reports whether it moved.
	IncrementLogStartOffset(offset int64) (bool, error)
}

// Replicas finds the local replica of a partition this broker follows.
type Replicas interface {
	Replica(t tp.TopicPartition) (Replica, bool)
}

// ReplicasFunc adapts a function to Replicas.
type ReplicasFunc func(t tp.TopicPartition) (Replica, bool)

// Replica calls f.
func (f ReplicasFunc) Replica(t tp.TopicPartition) (Replica, bool) { return f(t) }

// logReplica is a Replica over a bare *log.Log.
type logReplica struct {
	log         *log.Log
	leaderEpoch func() int32
}

// NewLogReplica adapts a log to Replica; leaderEpoch returns the partition's
// current leader epoch. Core may use it as is or wrap it to add checkpoints.
func NewLogReplica(l *log.Log, leaderEpoch func() int32) Replica {
	return &logReplica{log: l, leaderEpoch: leaderEpoch}
}

func (r *logReplica) LeaderEpoch() int32    { return r.leaderEpoch() }
func (r *logReplica) LogStartOffset() int64 { return r.log.LogStartOffset() }
func (r *logReplica) LogEndOffset() int64   { return r.log.LogEndOffset() }
func (r *logReplica) HighWatermark() int64  { return r.log.HighWatermark() }
func (r *logReplica) LatestEpoch() int32    { return r.log.LatestEpoch() }

func (r *logReplica) EndOffsetForEpoch(requested int32) (int32, int64) {
	e, end := r.log.EpochCache().EndOffsetFor(requested, r.log.LogEndOffset())
	if e == epoch.Undefined {
		return epoch.Undefined, epoch.Undefined
	}
	return e, end
}

func (r *logReplica) EarliestEpoch() (int32, int64) {
	e, ok := r.log.EpochCache().EarliestEntry()
	if !ok {
		return epoch.Undefined, epoch.Undefined
	}
	return e.Epoch, e.StartOffset
}

func (r *logReplica) AppendAsFollower(records []byte) (log.AppendInfo, error) {
	return r.log.AppendAsFollower(records)
}

func (r *logReplica) TruncateTo(offset int64) error { return r.log.TruncateTo(offset) }

func (r *logReplica) TruncateFullyAndStartAt(offset int64) error {
	return r.log.TruncateFullyAndStartAt(offset)
}

func (r *logReplica) UpdateFollowerHighWatermark(leaderHW int64) int64 {
	return r.log.UpdateHighWatermark(min(leaderHW, r.log.LogEndOffset()))
}

func (r *logReplica) IncrementLogStartOffset(offset int64) (bool, error) {
	return r.log.IncrementLogStartOffset(offset)
}
