package fetcher

import (
	"errors"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/replicad/replicad/core/epoch"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/telemetry"
)

// processFetchResponse applies each partition's answer, under mu, to the
// partitions whose state is still the one it was requested for.
func (f *fetcher) processFetchResponse(requested map[tp.TopicPartition]*partitionState, resp *replicadv1.FetchResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prevAnswer := f.answeredAt
	f.answeredAt = f.cfg.Clock.Now()
	var gotData map[tp.TopicPartition]bool
	for _, res := range resp.GetPartitions() {
		t := tp.TopicPartition{Topic: res.GetTopic(), Partition: res.GetPartition()}
		st, ok := f.partitions[t]
		if !ok || st != requested[t] {
			continue // removed, or re-added with a new epoch, while the fetch was out
		}
		if f.processPartition(t, st, res, prevAnswer) {
			if gotData == nil {
				gotData = make(map[tp.TopicPartition]bool)
			}
			gotData[t] = true
		}
	}
	// The leader shares max_bytes in request order: those served this time
	// go last next time, so that every partition gets its turn.
	f.moveToEndLocked(gotData)
}

// processPartition is Kafka's AbstractFetcherThread.processFetchRequest for
// one partition; it reports whether records were appended.
//
// prevAnswer is when the previous answer was applied (zero: none).
func (f *fetcher) processPartition(t tp.TopicPartition, st *partitionState, res *replicadv1.FetchPartitionResult, prevAnswer time.Time) (appended bool) {
	code := res.GetErrorCode()
	if code == replicadv1.ErrorCode_ERROR_CODE_NONE && res.GetDivergingEpoch() == nil {
		// The steady state, every partition of every answer: no logger is
		// built unless something goes wrong.
		return f.appendRecords(t, st, res, prevAnswer)
	}
	lg := f.partitionLogger(t, st)
	switch code {
	case replicadv1.ErrorCode_ERROR_CODE_NONE:
		// KIP-279: truncate, and do not apply records of this same answer:
		// they follow the leader's log, not ours.
		f.truncateOnDivergence(t, st, res.GetDivergingEpoch(), lg)
		return false
	case replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
		f.handleOutOfRange(t, st, res, lg)
	case replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH:
		// Our epoch is older than the leader's: only a new LeaderAndIsr
		// (with the new epoch) can resume this partition.
		f.markFailed(t, lg, "fenced leader epoch: awaiting the new LeaderAndIsr")
	case replicadv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID, replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID:
		// The leader's partition is another topic of the name (one side was
		// deleted and created again): nothing it sends is ours. Retried
		// after a delay, as Kafka does, not set aside: either side may be
		// the one behind. When it is the leader (it has not yet applied the
		// new topic's LeaderAndIsr), this broker already holds the new
		// topic's state and no further LeaderAndIsr with a new leader epoch
		// comes to it; set aside, the partition never fetched again and the
		// ISR never filled (seed 244401447). When it is this broker, its
		// own LeaderAndIsr or StopReplica removes this fetch state.
		lg.Warn().Str("error_code", telemetry.ErrorCodeName(code)).Str("topic_id", st.topicID).
			Msg("the leader's partition has another topic ID (a topic of the name is being deleted or created), retrying partition after backoff")
		f.delay(st)
	default:
		// UNKNOWN_LEADER_EPOCH and NOT_LEADER_OR_FOLLOWER mean the leader has
		// not yet applied the LeaderAndIsr we already have; it will, so these
		// and other leader-side errors are retried after a delay, as Kafka
		// does. Setting them aside until the next LeaderAndIsr would stop the
		// partition for good when that request comes to us first.
		lg.Info().Str("error_code", telemetry.ErrorCodeName(code)).Msg("fetch error, retrying partition after backoff")
		f.delay(st)
	}
	return false
}

// truncateOnDivergence truncates to the offset the diverging epoch gives
// (Kafka's getOffsetTruncationState). When the follower does not know the
// leader's epoch it truncates to its own end of the largest epoch below, and
// the next fetch, with an older lastFetchedEpoch, finds the exact point. When
// it holds no epoch at or below the leader's (all its epochs are newer), it
// drops everything from its first epoch, which the leader does not know.
//
// A truncation that changes nothing (same LEO, same last epoch) would make the
// next fetch ask the same question and get the same answer: the partition is
// then delayed instead of fetched again at once.
func (f *fetcher) truncateOnDivergence(t tp.TopicPartition, st *partitionState, de *replicadv1.EpochEndOffset, lg zerolog.Logger) {
	r := st.replica
	leo, lastEpoch := r.LogEndOffset(), r.LatestEpoch()
	var offset int64
	switch {
	case de.GetEndOffset() < 0:
		// The leader knows no end for any epoch we hold: fall back to the HW,
		// which is committed and so on the leader too.
		offset = min(r.HighWatermark(), leo)
	case de.GetEpoch() < 0:
		offset = min(de.GetEndOffset(), leo)
	default:
		followerEpoch, followerEnd := r.EndOffsetForEpoch(de.GetEpoch())
		switch {
		case followerEpoch == epoch.Undefined:
			offset = f.truncationBelowEpochs(r, de, leo)
		case followerEpoch != de.GetEpoch():
			offset = min(followerEnd, leo)
		default:
			offset = min(de.GetEndOffset(), followerEnd, leo)
		}
	}
	before := st.progress
	if !f.noteTruncation(t, st, leo, offset, lg) {
		return
	}
	lg.Info().Int32("diverging_epoch", de.GetEpoch()).Int64("diverging_end_offset", de.GetEndOffset()).
		Int64("truncate_to", offset).Msg("truncating on diverging epoch")
	span := f.startTruncate(t, st, "diverging epoch", offset, attribute.Int("replicad.diverging_epoch", int(de.GetEpoch())),
		attribute.Int64("replicad.diverging_end_offset", de.GetEndOffset()))
	err := r.TruncateTo(offset)
	endTruncate(span, r, err)
	if errors.Is(err, log.ErrFileLimit) {
		st.progress = before // nothing was truncated: no round of a loop
		f.retryOutOfDescriptors(st, lg, err)
		return
	}
	if err != nil {
		f.markFailedErr(t, lg, err, "truncate on diverging epoch")
		return
	}
	st.fetchOffset = r.LogEndOffset()
	if st.fetchOffset == leo && r.LatestEpoch() == lastEpoch {
		// The next fetch would carry the same offset and last fetched epoch,
		// and get the same answer: do not spin on it.
		lg.Warn().Int32("last_fetched_epoch", lastEpoch).
			Msg("truncation on diverging epoch changed nothing, retrying partition after backoff")
		f.delay(st)
	}
}

// Bounds of truncations that make no progress (see noteTruncation).
const (
	// stuckBackoffAfter truncations in a row without progress, each next
	// one waits PartitionBackoff doubled per truncation since, up to
	// maxStuckBackoff.
	stuckBackoffAfter = 2
	maxStuckBackoff   = 30 * time.Second
	// stuckLimit truncations in a row without progress set the partition
	// aside as failed, until the next LeaderAndIsr for it.
	stuckLimit = 10
)

// noteTruncation counts a truncation of the replica from logEnd to offset,
// and reports whether to go on with it. Truncating on divergence converges
// within a few rounds (one per epoch the logs disagree on), each below the
// last with no records fetched in between. A truncation after records were
// fetched again, from a log end no further than the replica had already
// reached before an earlier truncation, makes no progress: it truncated,
// fetched the same offsets back, and is told to truncate again. Such a
// loop, which a log of another topic of the same name once caused many
// times a second, backs off exponentially, and ends with the partition set
// aside as failed: a loop that reached stuckLimit will not converge by
// itself, and is logged at error so an operator looks.
func (f *fetcher) noteTruncation(t tp.TopicPartition, st *partitionState, logEnd, offset int64, lg zerolog.Logger) bool {
	pr := &st.progress
	refetched := logEnd > pr.truncatedTo
	pr.truncatedTo = min(offset, logEnd)
	switch {
	case logEnd > pr.highest:
		pr.highest, pr.stuck = logEnd, 0
		return true
	case !refetched:
		return true // the next round of one convergence
	}
	pr.stuck++
	if pr.stuck >= stuckLimit {
		lg.Error().Int("truncations", pr.stuck).Int64("truncate_to", offset).Int64("log_end_offset", logEnd).
			Msg("truncation makes no progress: setting the partition aside until its next LeaderAndIsr")
		f.markFailed(t, lg, "truncation makes no progress")
		return false
	}
	if pr.stuck >= stuckBackoffAfter {
		d := min(f.cfg.PartitionBackoff<<(pr.stuck-stuckBackoffAfter), maxStuckBackoff)
		lg.Warn().Int("truncations", pr.stuck).Int64("truncate_to", offset).Int64("log_end_offset", logEnd).Dur("backoff_ms", d).
			Msg("truncation makes no progress, backing off")
		st.delayedUntil = f.cfg.Clock.Now().Add(d)
	}
	return true
}

// truncationBelowEpochs is the truncation offset when the follower holds no
// epoch <= the leader's diverging epoch. Kafka's follower then truncates to
// the start of its earliest epoch (its cache answers an epoch older than
// every entry with that start): everything from the first epoch the leader
// does not know goes, so the next fetch carries another last fetched epoch.
// Truncating to the leader's end offset alone could keep records of that
// epoch, and with them the same last fetched epoch, forever.
func (f *fetcher) truncationBelowEpochs(r Replica, de *replicadv1.EpochEndOffset, leo int64) int64 {
	earliestEpoch, earliestStart := r.EarliestEpoch()
	switch {
	case earliestEpoch == epoch.Undefined:
		// No epoch at all: nothing held is known to match the leader's log.
		return min(r.LogStartOffset(), de.GetEndOffset(), leo)
	case de.GetEpoch() < earliestEpoch:
		return min(earliestStart, de.GetEndOffset(), leo)
	default:
		// An epoch newer than every one held: a leader answers at most the
		// epoch it was sent, so this is not expected; the leader's end
		// offset is the best bound (and a no-op is delayed, not spun on).
		return min(de.GetEndOffset(), leo)
	}
}

// partitionLogger is the fetcher's logger with t and its fetch state.
func (f *fetcher) partitionLogger(t tp.TopicPartition, st *partitionState) zerolog.Logger {
	return f.logger.With().Str("topic", t.Topic).Int32("partition", t.Partition).
		Int32("leader_epoch", st.leaderEpoch).Int64("fetch_offset", st.fetchOffset).Logger()
}

// appendRecords appends the answer's batches and moves the follower HW; it
// reports whether records were appended.
func (f *fetcher) appendRecords(t tp.TopicPartition, st *partitionState, res *replicadv1.FetchPartitionResult, prevAnswer time.Time) (appended bool) {
	r := st.replica
	data := completeBatches(res.GetRecords())
	if len(data) > 0 {
		if leo := r.LogEndOffset(); leo != st.fetchOffset {
			// Someone else wrote to the replica: a broken contract, not a
			// fetch problem (Kafka raises IllegalStateException here).
			lg := f.partitionLogger(t, st)
			lg.Error().Int64("log_end_offset", leo).Msg("fetch offset does not match the log end offset")
			f.markFailed(t, lg, "offset mismatch")
			return false
		}
		_, err := r.AppendAsFollower(data)
		if errors.Is(err, log.ErrOffsetMismatch) {
			err = f.restartAtBatch(t, st, data, err)
		}
		if err != nil {
			lg := f.partitionLogger(t, st)
			if errors.Is(err, record.ErrCorrupt) || errors.Is(err, record.ErrTruncated) {
				// Nothing was appended; fetch the same offset again later.
				lg.Warn().Err(err).Msg("corrupt batch from leader, retrying partition after backoff")
				f.delay(st)
				return false
			}
			if errors.Is(err, log.ErrFileLimit) {
				// The log is as it was, or holds a prefix of the answer
				// (a roll needed the descriptor).
				f.retryOutOfDescriptors(st, lg, err)
				return false
			}
			f.markFailedErr(t, lg, err, "append as follower")
			return false
		}
	}
	st.fetchOffset = r.LogEndOffset()
	hw := r.UpdateFollowerHighWatermark(res.GetHighWatermark())
	prevLag := st.lag
	st.lag = max(0, max(res.GetLogEndOffset(), res.GetHighWatermark())-st.fetchOffset)
	switch {
	case st.lag == 0:
		st.caughtUpAt = f.cfg.Clock.Now()
	case prevLag == 0 && prevAnswer.After(st.caughtUpAt):
		// Caught up at the previous answer: a session answer leaves out a
		// partition with nothing new, so its caughtUpAt did not move then.
		st.caughtUpAt = prevAnswer
	}
	f.followLogStart(t, st, res.GetLogStartOffset(), hw)
	return len(data) > 0
}

// restartAtBatch handles the first append after restarting an empty log at
// the leader's log start when that start is inside a batch (DeleteRecords to
// an offset within one): the leader answers with the whole batch, whose base
// is below our log end. As Kafka's Partition does (its
// UnexpectedAppendOffsetException), an empty log whose end the first batch
// straddles starts over at the batch's base and takes it; followLogStart
// then raises the log start to the leader's again. Anything else keeps
// appendErr.
func (f *fetcher) restartAtBatch(t tp.TopicPartition, st *partitionState, data []byte, appendErr error) error {
	r := st.replica
	leo := r.LogEndOffset()
	b, _, err := record.Next(data)
	if err != nil || leo != r.LogStartOffset() || b.BaseOffset() >= leo || b.LastOffset() < leo {
		return appendErr
	}
	lg := f.partitionLogger(t, st)
	lg.Info().Int64("base_offset", b.BaseOffset()).Int64("last_offset", b.LastOffset()).
		Msg("first batch starts below the restarted log's start (the leader's log start is inside it): restarting the log at its base")
	span := f.startTruncate(t, st, "leader's log start inside a batch", b.BaseOffset(), attribute.Bool("replicad.truncate_fully", true))
	err = r.TruncateFullyAndStartAt(b.BaseOffset())
	endTruncate(span, r, err)
	if err != nil {
		return err
	}
	_, err = r.AppendAsFollower(data)
	return err
}

// followLogStart raises the replica's log start to the leader's (retention
// or DeleteRecords deleted records there), as Kafka's follower does after
// each fetch; at most to its own HW, which only records the leader
// committed reach. A failure is the log's (a storage error fails the
// partition at its next append); the next fetch tries again.
func (f *fetcher) followLogStart(t tp.TopicPartition, st *partitionState, leaderStart, hw int64) {
	r := st.replica
	target := min(leaderStart, hw)
	if target <= r.LogStartOffset() {
		return
	}
	if _, err := r.IncrementLogStartOffset(target); err != nil {
		lg := f.partitionLogger(t, st)
		lg.Warn().Err(err).Int64("leader_log_start_offset", leaderStart).Msg("raise log start to the leader's")
		return
	}
	lg := f.partitionLogger(t, st)
	lg.Debug().Int64("log_start_offset", target).Msg("raised log start to the leader's")
}

// handleOutOfRange brings the log back into the leader's range: the leader's
// log ends before our fetch offset (an unclean leader, or we hold records it
// never had) -> truncate to its end; our fetch offset is below the leader's
// log start (it deleted what we need) -> start over at its log start.
func (f *fetcher) handleOutOfRange(t tp.TopicPartition, st *partitionState, res *replicadv1.FetchPartitionResult, lg zerolog.Logger) {
	r := st.replica
	leaderEnd, leaderStart := res.GetLogEndOffset(), res.GetLogStartOffset()
	var err error
	leaderAttrs := []attribute.KeyValue{attribute.Int64("replicad.leader_log_end_offset", leaderEnd),
		attribute.Int64("replicad.leader_log_start_offset", leaderStart)}
	before := st.progress
	switch {
	case leaderEnd < st.fetchOffset:
		if !f.noteTruncation(t, st, r.LogEndOffset(), leaderEnd, lg) {
			return
		}
		lg.Warn().Int64("leader_log_end_offset", leaderEnd).Msg("fetch offset beyond the leader's log end, truncating to it")
		span := f.startTruncate(t, st, "fetch offset beyond the leader's log end", leaderEnd, leaderAttrs...)
		err = r.TruncateTo(leaderEnd)
		endTruncate(span, r, err)
	case st.fetchOffset < leaderStart:
		lg.Warn().Int64("leader_log_start_offset", leaderStart).Msg("fetch offset below the leader's log start, restarting the log there")
		span := f.startTruncate(t, st, "fetch offset below the leader's log start", leaderStart,
			append(leaderAttrs, attribute.Bool("replicad.truncate_fully", true))...)
		err = r.TruncateFullyAndStartAt(leaderStart)
		endTruncate(span, r, err)
	default:
		// The leader's log moved between its answer and now: ask again.
		f.delay(st)
		return
	}
	if errors.Is(err, log.ErrFileLimit) {
		st.progress = before
		f.retryOutOfDescriptors(st, lg, err)
		return
	}
	if err != nil {
		f.markFailedErr(t, lg, err, "truncate on offset out of range")
		return
	}
	st.fetchOffset = r.LogEndOffset()
}

// retryOutOfDescriptors handles an append or truncation that failed for
// want of a file descriptor (log.ErrFileLimit): no fault of the partition's,
// and the log changed at most by a prefix of what was asked. The partition
// fetches on from the log's end once its backoff is over.
func (f *fetcher) retryOutOfDescriptors(st *partitionState, lg zerolog.Logger, err error) {
	lg.Warn().Err(err).Msg("out of file descriptors, retrying partition after backoff")
	st.fetchOffset = st.replica.LogEndOffset()
	f.delay(st)
}

// delay keeps the partition out of fetches for PartitionBackoff.
func (f *fetcher) delay(st *partitionState) {
	st.delayedUntil = f.cfg.Clock.Now().Add(f.cfg.PartitionBackoff)
}

func (f *fetcher) markFailedErr(t tp.TopicPartition, lg zerolog.Logger, err error, what string) {
	lg.Error().Err(err).Msg(what)
	f.markFailed(t, lg, what+" failed")
}

// markFailed sets the partition aside until the next AddFetcherForPartitions
// for it; the fetcher goes on with its other partitions. Runs under mu.
func (f *fetcher) markFailed(t tp.TopicPartition, lg zerolog.Logger, why string) {
	delete(f.partitions, t)
	f.orderClean = false
	f.failed.add(t)
	lg.Warn().Str("reason", why).Msg("partition marked failed")
}

// completeBatches cuts a trailing partial batch off data: a leader may stop
// at max_bytes inside a batch, and the rest comes with the next fetch.
func completeBatches(data []byte) []byte {
	n := 0
	for n < len(data) {
		size, err := record.Size(data[n:])
		if err != nil {
			if errors.Is(err, record.ErrTruncated) {
				break
			}
			return data // corrupt: let AppendAsFollower say so
		}
		if n+size > len(data) {
			break
		}
		n += size
	}
	return data[:n]
}
