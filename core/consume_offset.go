package core

// Consume's logical offsets (ConsumeRequest.Offset), as Kafka's
// ListOffsets timestamps: where a consumer that knows no offset starts.
const (
	// ConsumeLatest is the high watermark when the request arrives: only
	// records committed from then on.
	ConsumeLatest int64 = -1
	// ConsumeEarliest is the log start offset: everything still held.
	ConsumeEarliest int64 = -2
)

// resolveConsumeOffset turns a logical offset into the partition's offset
// of the moment, on the leader. A failure is answered as readCommitted
// answers it (ok false); another negative offset is INVALID_REQUEST.
func (p *Partition) resolveConsumeOffset(offset int64) (int64, ConsumeResult, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped || !p.isLeaderLocked() || p.log == nil {
		return offset, ConsumeResult{Error: ErrNotLeaderOrFollower, HighWatermark: -1, LogStartOffset: -1, NextOffset: offset}, false
	}
	l := p.log
	switch offset {
	case ConsumeLatest:
		return l.HighWatermark(), ConsumeResult{}, true
	case ConsumeEarliest:
		return l.LogStartOffset(), ConsumeResult{}, true
	}
	return offset, ConsumeResult{Error: ErrInvalidRequest, HighWatermark: l.HighWatermark(), LogStartOffset: l.LogStartOffset(), NextOffset: offset}, false
}
