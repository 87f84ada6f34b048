package core

import (
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// FollowerLog returns the log of a partition this broker hosts, online, as a
// follower, and a function reading the partition's current leader epoch: the
// fetcher writes to the log and drops its fetch state once the epoch moves
// past the one it was started with (a newer LeaderAndIsr owns the partition).
func (rm *ReplicaManager) FollowerLog(t tp.TopicPartition) (*log.Log, func() int32, bool) {
	p, code := rm.onlinePartition(t)
	if code != ErrNone {
		return nil, nil, false
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped || p.isLeaderLocked() || p.log == nil {
		return nil, nil, false
	}
	return p.log, p.LeaderEpoch, true
}

// CheckpointAfterTruncation writes the recovery-point checkpoint of the log
// dir holding t, after a follower truncated t's log: see
// logmgr.Manager.CheckpointLogOffsetsOf. A failure takes the dir offline.
func (rm *ReplicaManager) CheckpointAfterTruncation(t tp.TopicPartition) error {
	return rm.logs.CheckpointLogOffsetsOf(t)
}

// CheckpointFutureAfterTruncation is CheckpointAfterTruncation for t's future
// log (a replica being moved between log dirs), after the alter-log-dirs
// fetcher truncated it: it writes the recovery-point checkpoint of the dir the
// future log is in (logmgr.Manager.CheckpointLogOffsetsOfFuture). A failure
// takes that dir offline.
func (rm *ReplicaManager) CheckpointFutureAfterTruncation(t tp.TopicPartition) error {
	return rm.logs.CheckpointLogOffsetsOfFuture(t)
}
