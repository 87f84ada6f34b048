package core

import "context"

// OffsetsForLeaderEpoch answers, per partition this broker leads, the largest
// leader epoch <= the requested one and its end offset (Kafka's
// lastOffsetForLeaderEpoch with fetchOnlyFromLeader), for tools and followers
// that truncate before fetching. The current leader epoch is checked as in a
// fetch. An epoch the cache cannot place is answered (-1, -1).
func (rm *ReplicaManager) OffsetsForLeaderEpoch(_ context.Context, req OffsetsForLeaderEpochRequest) OffsetsForLeaderEpochResponse {
	resp := OffsetsForLeaderEpochResponse{Partitions: make([]OffsetForLeaderEpochResult, len(req.Partitions))}
	for i, op := range req.Partitions {
		res := OffsetForLeaderEpochResult{TopicPartition: op.TopicPartition, LeaderEpoch: -1, EndOffset: -1}
		if p, code := rm.onlinePartition(op.TopicPartition); code != ErrNone {
			res.Error = code
		} else {
			res.Error, res.LeaderEpoch, res.EndOffset = p.lastOffsetForLeaderEpoch(op.CurrentLeaderEpoch, op.LeaderEpoch)
		}
		resp.Partitions[i] = res
	}
	return resp
}

func (p *Partition) lastOffsetForLeaderEpoch(current, requested int32) (ErrorCode, int32, int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped || p.log == nil {
		return ErrNotLeaderOrFollower, -1, -1
	}
	if code := p.checkCurrentLeaderEpochLocked(current); code != ErrNone {
		return code, -1, -1
	}
	if !p.isLeaderLocked() {
		return ErrNotLeaderOrFollower, -1, -1
	}
	e, end := p.log.EpochCache().EndOffsetFor(requested, p.log.LogEndOffset())
	return ErrNone, e, end
}
