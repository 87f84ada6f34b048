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

// LocalLog returns the log of a partition this broker hosts online, as
// leader or follower: for inspection (tests/sim reads every replica's
// records to check its invariants). Nothing may write through it.
func (rm *ReplicaManager) LocalLog(t tp.TopicPartition) (*log.Log, bool) {
	p, code := rm.onlinePartition(t)
	if code != ErrNone {
		return nil, false
	}
	l := p.Log()
	return l, l != nil
}
