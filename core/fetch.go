package core

import (
	"context"
	"slices"
	"time"

	"github.com/replicad/replicad/core/epoch"
)

// DefaultFetchMaxBytes bounds a fetch response that gave no max bytes, and
// caps one that asked for more (Kafka's replica.fetch.response.max.bytes):
// what a fetch holds in memory follows the broker, not the request.
const DefaultFetchMaxBytes = 10 << 20

// FetchMessages answers a follower's fetch as leader (Kafka's
// ReplicaManager.fetchMessages for a replica): per partition it checks the
// leader epoch, answers a diverging epoch or OFFSET_OUT_OF_RANGE, or reads the
// raw batches from fetch_offset up to the LEO and records the follower's
// progress, which may expand the ISR and move the HW.
//
// When the response holds fewer than MinBytes it waits up to MaxWait (Kafka's
// DelayedFetch), woken by an append or a log start rise on any requested
// partition, so a caught-up follower gets new data, and learns of deleted
// records, at once; of an HW moved by a follower's report it hears
// HighWatermarkLinger later, unless records come first and carry it. The
// follower's own
// progress is recorded before the wait: an acks=-1 produce waiting on that
// follower completes without waiting for the fetch to answer.
//
// Records are shared across partitions: MaxBytes bounds the whole response,
// and a partition reached after the budget is spent gets no records but is
// still recorded as fetched. The follower should rotate its partitions so
// none starves.
func (rm *ReplicaManager) FetchMessages(ctx context.Context, req FetchRequest) FetchResponse {
	if !rm.checkBrokerEpoch(req.ReplicaID, req.BrokerEpoch) {
		return failFetch(req, ErrStaleBrokerEpoch)
	}
	maxBytes := req.MaxBytes
	if maxBytes <= 0 || maxBytes > DefaultFetchMaxBytes {
		maxBytes = DefaultFetchMaxBytes
	}
	req.MaxWait = min(req.MaxWait, MaxConsumeWait)
	var wake chan struct{}
	if req.MaxWait > 0 && req.MinBytes > 0 {
		// Watch before the first read, so an append between that read and
		// the wait is not missed.
		wake = make(chan struct{}, 1)
		for _, fp := range req.Partitions {
			if p, code := rm.onlinePartition(fp.TopicPartition); code == ErrNone {
				p.changed.watch(wake)
				defer p.changed.unwatch(wake)
			}
		}
	}
	first, n, cut, firstThrottled := rm.readFromLocalLogs(req, maxBytes, true /* updateFetchState */)
	if wake == nil || n >= req.MinBytes || cut || needsAnswerNow(first) {
		return first
	}
	expired := make(chan struct{})
	t := rm.cfg.Clock.AfterFunc(req.MaxWait, func() { close(expired) })
	defer t.Stop()
	for {
		timedOut := false
		select {
		case <-wake:
		case <-expired:
			timedOut = true
		case <-ctx.Done():
			return first
		case <-rm.stopCh:
			return first
		}
		// The follower's state was recorded by the first read: reading again
		// only refreshes what it gets (Kafka's DelayedFetch.onComplete).
		resp, n, cut, throttled := rm.readFromLocalLogs(req, maxBytes, false /* updateFetchState */)
		if timedOut || n >= req.MinBytes || cut || needsAnswerNow(resp) || highWatermarkMoved(first, resp) || logStartMoved(first, resp) {
			// first is not sent: the throttle gets its bytes back.
			rm.throttle.giveBack(firstThrottled)
			return resp
		}
		rm.throttle.giveBack(throttled)
	}
}

// HighWatermarkLinger is how long after a follower's report moved the HW the
// parked follower fetches hear of it, unless records come first and carry
// it. The delayed acks=-1 produces complete at once. Woken at once, every
// acks=-1 record cost a round trip more per follower (the follower that
// reported first was answered the HW the second one's report moved, and
// fetched again), and two goroutines that re-read the log ran on the
// leader's CPU just as the producer's answer was due. Under load the next
// records come sooner and bring the HW; idle, a follower's HW (min of the
// leader's and its LEO) trails the leader's by this long, not by a whole
// max_wait. Log start moves still wake them at once: they are rare, and a
// DeleteRecords waits for the followers to follow them.
const HighWatermarkLinger = time.Millisecond

// failFetch answers every partition with code.
func failFetch(req FetchRequest, code ErrorCode) FetchResponse {
	resp := FetchResponse{Partitions: make([]FetchPartitionResult, len(req.Partitions))}
	for i, fp := range req.Partitions {
		resp.Partitions[i] = FetchPartitionResult{TopicPartition: fp.TopicPartition, Error: code,
			HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
	}
	return resp
}

// needsAnswerNow reports a result the follower must act on at once: an error
// or a diverging epoch (Kafka's DelayedFetch completes on those too).
func needsAnswerNow(resp FetchResponse) bool {
	for _, r := range resp.Partitions {
		if r.Error != ErrNone || r.DivergingEpoch != nil {
			return true
		}
	}
	return false
}

// highWatermarkMoved reports a partition whose HW changed between two reads.
// A waiting follower is answered then, so its own HW (min of the leader's HW
// and its LEO) does not lag a whole max_wait behind the leader's.
func highWatermarkMoved(before, after FetchResponse) bool {
	for i := range before.Partitions {
		if before.Partitions[i].HighWatermark != after.Partitions[i].HighWatermark {
			return true
		}
	}
	return false
}

// logStartMoved reports a partition whose log start rose between two reads
// (retention or DeleteRecords): a waiting follower is answered then, so it
// deletes what the leader deleted without waiting a whole max_wait.
func logStartMoved(before, after FetchResponse) bool {
	for i := range before.Partitions {
		if before.Partitions[i].LogStartOffset != after.Partitions[i].LogStartOffset {
			return true
		}
	}
	return false
}

// readFromLocalLogs reads every requested partition (Kafka's readFromLog) and
// returns the response with the number of record bytes in it. cut reports a
// partition left without records by req.HardMaxBytes although it had some.
// throttled is the part of total read under the replication throttle (for
// a follower outside the ISR), taken from its bucket: a caller that does not
// send the response gives it back.
func (rm *ReplicaManager) readFromLocalLogs(req FetchRequest, maxBytes int, updateFetchState bool) (resp FetchResponse, total int, cut bool, throttled int) {
	resp = FetchResponse{Partitions: make([]FetchPartitionResult, len(req.Partitions))}
	for i, fp := range req.Partitions {
		res := FetchPartitionResult{TopicPartition: fp.TopicPartition, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
		p, code := rm.onlinePartition(fp.TopicPartition)
		if code != ErrNone {
			res.Error = code
		} else {
			var err error
			var isThrottled bool
			res, isThrottled, err = p.fetchRecords(req.ReplicaID, req.BrokerEpoch, fp, max(0, maxBytes-total), updateFetchState, rm.throttle)
			if err != nil {
				rm.handleReadError(context.Background(), fp.TopicPartition, err)
			}
			if req.HardMaxBytes && len(res.Records) > maxBytes-total {
				// The first batch alone did not fit. The follower's
				// progress was recorded: that needs no records.
				res.Records, cut = nil, true
			}
			if isThrottled {
				// Taken now, so the next partition of this fetch
				// sees what is left.
				rm.throttle.take(len(res.Records))
				throttled += len(res.Records)
			}
		}
		total += len(res.Records)
		resp.Partitions[i] = res
	}
	return resp, total, cut, throttled
}

// checkBrokerEpoch reports false for a fetch whose broker epoch is older
// than the one the controller last gave for that broker: a fetcher left over
// from the broker's previous life (KIP-380) must not move the HW or join the
// ISR. A fetch's claim is never recorded, so it can fence no one: an epoch
// newer than the known one passes (the broker registered again and the
// controller has not said so yet, as KIP-903 allows), and so does any epoch
// of a broker the controller never named (standalone, where no broker has
// one) and a negative (unknown) one.
func (rm *ReplicaManager) checkBrokerEpoch(replicaID int32, brokerEpoch int64) bool {
	if brokerEpoch < 0 {
		return true
	}
	rm.brokerEpochsMu.Lock()
	defer rm.brokerEpochsMu.Unlock()
	known, ok := rm.brokerEpochs[replicaID]
	return !ok || brokerEpoch >= known
}

// learnBrokerEpochs records the broker epochs a controller request carries
// (0, unknown, is skipped). Epochs only grow: a registration gets a newer
// one, and a request carrying an older one (reordered) lowers nothing.
func (rm *ReplicaManager) learnBrokerEpochs(brokers []Broker) {
	rm.brokerEpochsMu.Lock()
	defer rm.brokerEpochsMu.Unlock()
	for _, b := range brokers {
		if b.Epoch <= 0 {
			continue
		}
		if rm.brokerEpochs == nil {
			rm.brokerEpochs = make(map[int32]int64)
		}
		if b.Epoch > rm.brokerEpochs[b.ID] {
			rm.brokerEpochs[b.ID] = b.Epoch
		}
	}
}

// fetchRecords answers one partition of a follower's fetch (Kafka's
// Partition.fetchRecords): it reads under the read lock, then records the
// follower's progress under the write lock. Nothing is recorded for a fetch
// that failed or diverged: its offset says nothing true about the follower.
//
// throttle is the leader's replication throttle: a replica being added that
// is outside the ISR reads at most what it allows, and throttled then says so
// (the caller takes the bytes).
func (p *Partition) fetchRecords(replicaID int32, brokerEpoch int64, fp FetchPartition, maxBytes int, updateFetchState bool, throttle *tokenBucket) (res FetchPartitionResult, throttled bool, err error) {
	res, leaderEpoch, throttled, err := p.readForFollower(replicaID, fp, maxBytes, throttle)
	if res.Error != ErrNone || res.DivergingEpoch != nil || !updateFetchState {
		return res, throttled, err
	}
	if hw, ok := p.updateFollowerFetchState(replicaID, leaderEpoch, fp.FetchOffset, fp.LogStartOffset, res.LogEndOffset, brokerEpoch); ok {
		// Answer the HW this fetch may just have moved.
		res.HighWatermark = hw
	}
	return res, throttled, nil
}

// readForFollower validates a follower's fetch and reads from fetch_offset up
// to the LEO (followers read above the HW). It returns the leader epoch the
// read happened in, and whether the read was under the throttle.
func (p *Partition) readForFollower(replicaID int32, fp FetchPartition, maxBytes int, throttle *tokenBucket) (FetchPartitionResult, int32, bool, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	res := FetchPartitionResult{TopicPartition: fp.TopicPartition, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
	if p.stopped || p.log == nil {
		res.Error = ErrNotLeaderOrFollower
		return res, 0, false, nil
	}
	// A follower of another topic of this name (deleted and created
	// again) must not take this log's records for its own.
	if topicIDsConflict(fp.TopicID, p.topicID) {
		res.Error = ErrInconsistentTopicID
		return res, 0, false, nil
	}
	// Kafka checks the epoch before the role: a fetch from an older epoch is
	// fenced whatever this broker is now.
	if res.Error = p.checkCurrentLeaderEpochLocked(fp.CurrentLeaderEpoch); res.Error != ErrNone {
		return res, 0, false, nil
	}
	// A replica outside the assignment gets NOT_LEADER_OR_FOLLOWER, as in
	// Kafka's updateFollowerFetchState: the follower sets the partition aside
	// until the LeaderAndIsr that reassigned it reaches it.
	if _, ok := p.remoteReplicas[replicaID]; !ok || !p.isLeaderLocked() {
		res.Error = ErrNotLeaderOrFollower
		return res, 0, false, nil
	}
	l := p.log
	leo := l.LogEndOffset()
	res.HighWatermark, res.LogStartOffset, res.LogEndOffset = l.HighWatermark(), l.LogStartOffset(), leo
	if res.DivergingEpoch = p.divergingEpochLocked(fp.FetchOffset, fp.LastFetchedEpoch, leo); res.DivergingEpoch != nil {
		return res, p.leaderEpoch, false, nil
	}
	if fp.FetchOffset < res.LogStartOffset || fp.FetchOffset > leo {
		res.Error = ErrOffsetOutOfRange
		return res, p.leaderEpoch, false, nil
	}
	throttled := false
	if maxBytes > 0 && fp.FetchOffset < leo && throttle != nil &&
		slices.Contains(p.adding, replicaID) && !slices.Contains(p.maximalIsrLocked(), replicaID) {
		// A replica a reassignment is adding reads within the throttle
		// until it joins the ISR (Kafka throttles the replicas listed in
		// follower.replication.throttled.replicas, the moving ones). Any
		// other follower outside the ISR, one back from a restart or that
		// fell behind, catches up at full speed: throttled, it would keep
		// the partition under-replicated for as long as the move lasts.
		// The maximal ISR: a follower whose expansion is pending has
		// caught up already.
		var allowed int
		if allowed, throttled = throttle.available(); throttled {
			maxBytes = min(maxBytes, allowed)
		}
	}
	if maxBytes > 0 && fp.FetchOffset < leo {
		// A follower checks each batch's CRC before appending it, but a
		// leader must not offer it damaged data either: the follower
		// would retry for ever, and an operator would not hear of it.
		data, code, err := readVerified(l, fp.FetchOffset, maxBytes, leo)
		if code != ErrNone {
			// Out of range: the log start moved past the offset since
			// the check above.
			res.Error, res.LogStartOffset = code, l.LogStartOffset()
			return res, p.leaderEpoch, throttled, err
		}
		res.Records = data
	}
	return res, p.leaderEpoch, throttled, nil
}

// checkCurrentLeaderEpochLocked fences a request made for another leader
// epoch (KIP-320): older is FENCED_LEADER_EPOCH, newer (this broker has not
// heard of it yet) UNKNOWN_LEADER_EPOCH. A negative epoch is not checked.
func (p *Partition) checkCurrentLeaderEpochLocked(current int32) ErrorCode {
	switch {
	case current < 0:
		return ErrNone
	case current < p.leaderEpoch:
		return ErrFencedLeaderEpoch
	case current > p.leaderEpoch:
		return ErrUnknownLeaderEpoch
	}
	return ErrNone
}

// divergingEpochLocked is KIP-279's check (Kafka's
// validateFetchOffsetAndMaybeGetDivergingEpoch): the follower's log diverges
// when the largest leader epoch <= its last fetched epoch is smaller than
// that epoch, or ends on the leader before the fetch offset. The answer is
// that epoch and its end offset; the follower truncates to it.
//
// Where the epoch cache has no answer, this answers as Kafka 2.1+ would: an
// epoch older than every epoch here diverges at the first epoch's start
// offset, and one newer than the latest (which is this leader's) is answered
// with the latest epoch, ending at the LEO.
func (p *Partition) divergingEpochLocked(fetchOffset int64, lastFetchedEpoch int32, leo int64) *EpochEndOffset {
	if lastFetchedEpoch < 0 {
		return nil
	}
	cache := p.log.EpochCache()
	e, end := cache.EndOffsetFor(lastFetchedEpoch, leo)
	if e == epoch.Undefined {
		first, ok := cache.EarliestEntry()
		if !ok {
			return nil // no epochs at all: the range check decides
		}
		if lastFetchedEpoch < first.Epoch {
			e, end = lastFetchedEpoch, first.StartOffset
		} else {
			e, end = cache.LatestEpoch(), leo
		}
	}
	if e < lastFetchedEpoch || end < fetchOffset {
		return &EpochEndOffset{Epoch: e, EndOffset: end}
	}
	return nil
}

// updateFollowerFetchState records a follower's fetch (Kafka's
// Partition.updateFollowerFetchState), then expands the ISR and moves the HW
// if it can, waking waiters when the HW moved. It returns the HW after, and
// false when leadership changed since the read (the fetch then proves
// nothing about the new epoch).
func (p *Partition) updateFollowerFetchState(replicaID, readEpoch int32, fetchOffset, followerLogStart, leaderLEO, brokerEpoch int64) (int64, bool) {
	p.mu.Lock()
	r, ok := p.remoteReplicas[replicaID]
	if !ok || p.stopped || !p.isLeaderLocked() || p.leaderEpoch != readEpoch || p.log == nil {
		p.mu.Unlock()
		return 0, false
	}
	prevLEO, prevStart := r.logEndOffset, r.logStartOffset
	r.updateFetchState(p.env.clock.Now(), fetchOffset, leaderLEO, brokerEpoch)
	r.logStartOffset = followerLogStart
	pending := p.maybeExpandIsrLocked(r)
	hwMoved := false
	if pending != nil || prevLEO != r.logEndOffset {
		hwMoved = p.maybeIncrementLeaderHWLocked()
	}
	hw := p.log.HighWatermark()
	p.mu.Unlock()
	p.submitIsrChange(pending)
	switch {
	case followerLogStart != prevStart:
		// Delayed acks=-1 produces and reads waiting on the HW complete
		// now, and DeleteRecords waiting on the ISR's log starts.
		p.changed.notify()
	case hwMoved:
		// The delayed produces now, the parked follower fetches later
		// (see HighWatermarkLinger).
		p.changed.notifyWaitersNow(p.env.clock, HighWatermarkLinger)
	}
	return hw, true
}

// updateFetchState is Kafka's Replica.updateFetchStateOrThrow. The follower
// caught up at this fetch if it asked for the leader's LEO; otherwise it was
// caught up at its previous fetch if it now asks for at least the LEO the
// leader had then, which keeps a follower that always trails a busy leader by
// one round trip in the ISR.
func (r *replicaState) updateFetchState(now time.Time, fetchOffset, leaderLEO, brokerEpoch int64) {
	switch {
	case fetchOffset >= leaderLEO:
		r.lastCaughtUpTime = laterOf(r.lastCaughtUpTime, now)
	case r.lastFetchLeaderLogEndOffset != unknownOffset && fetchOffset >= r.lastFetchLeaderLogEndOffset:
		r.lastCaughtUpTime = laterOf(r.lastCaughtUpTime, r.lastFetchTime)
	}
	r.logEndOffset = fetchOffset
	r.lastFetchLeaderLogEndOffset = leaderLEO
	r.lastFetchTime = now
	if brokerEpoch >= 0 {
		r.brokerEpoch = brokerEpoch
	}
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
