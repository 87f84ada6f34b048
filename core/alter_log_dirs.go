package core

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/epoch"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// Alter log dirs (Kafka's AlterReplicaLogDirs, ReplicaAlterLogDirsManager and
// Partition.maybeReplaceCurrentWithFutureReplica).
//
// A move creates a future log in the destination dir and hands the partition
// to the alter-log-dirs fetcher manager (Config.AlterLogDirsFetchers), which
// fetches, through a local source (FetchFromCurrentLog), from the current log
// of this same broker into the future log. When a fetch shows the future log
// caught up, the move check (maybeReplaceCurrentWithFutureReplica) swaps it in
// under the partition's write lock, which appends take for reading, so no
// append falls between the catch-up check and the swap. On a follower the
// replica fetcher may still truncate and refill the current log between the
// fetch that found the future log caught up and the swap, so the swap checks
// that both logs hold the same epochs, not just the same LEO.

// AlterReplicaLogDir asks for one partition to be moved to LogDir.
type AlterReplicaLogDir struct {
	TopicPartition tp.TopicPartition
	LogDir         string
}

// maxTailCopyBytes bounds what the swap copies itself, under the partition's
// write lock, from the current log to a future log that is nearly caught up:
// a busy partition's future log would otherwise rarely be exactly level when
// the swap is tried.
const maxTailCopyBytes = 1 << 20

// localBroker is the source of the alter-log-dirs fetchers: this broker.
func (rm *ReplicaManager) localBroker() Broker {
	return Broker{ID: rm.cfg.BrokerID, Host: "localhost", Port: -1}
}

// AlterReplicaLogDirs starts moving replicas between this broker's log dirs
// (Kafka's ReplicaManager.alterReplicaLogDirs). Per partition: a dir that is
// not configured is LOG_DIR_NOT_FOUND, an offline one STORAGE_ERROR; a
// partition not hosted is UNKNOWN_TOPIC_OR_PARTITION (offline:
// STORAGE_ERROR). A partition already in the dir answers NONE, and a move to
// another dir in progress is abandoned; a move to the same dir in progress
// answers NONE and continues. Otherwise a future log is created in the dir
// and the alter-log-dirs fetcher starts filling it.
func (rm *ReplicaManager) AlterReplicaLogDirs(ctx context.Context, reqs []AlterReplicaLogDir) []PartitionError {
	ctx, span := rm.tracer.Start(ctx, "ReplicaManager.alterReplicaLogDirs",
		trace.WithAttributes(attribute.Int("replicad.partitions", len(reqs))))
	defer span.End()
	rm.stateChangeMu.Lock()
	defer rm.stateChangeMu.Unlock()
	out := make([]PartitionError, len(reqs))
	for i, r := range reqs {
		code := rm.alterReplicaLogDirLocked(ctx, r)
		out[i] = PartitionError{TopicPartition: r.TopicPartition, Error: code}
		rm.stateLog.Info().Str("topic", r.TopicPartition.Topic).Int32("partition", r.TopicPartition.Partition).
			Str("log_dir", r.LogDir).Str("error_code", code.String()).Msg("alter replica log dir")
	}
	return out
}

// alterReplicaLogDirLocked handles one partition; stateChangeMu is held.
func (rm *ReplicaManager) alterReplicaLogDirLocked(ctx context.Context, r AlterReplicaLogDir) ErrorCode {
	t := r.TopicPartition
	dir := filepath.Clean(r.LogDir)
	var dest *logmgr.DirInfo
	for _, d := range rm.logs.Dirs() {
		if d.Path == dir {
			dest = &d
			break
		}
	}
	switch {
	case dest == nil:
		return ErrLogDirNotFound
	case !dest.Online:
		return ErrStorageError
	}
	p, code := rm.onlinePartition(t)
	if code != ErrNone {
		return code
	}
	if p.Log() == nil {
		return ErrReplicaNotAvailable
	}
	if d, ok := p.Log().Damaged(); ok {
		// A copy would stop at the damage and then replace the log, which
		// keeps the records after it on disk, with one that lacks them
		// and no longer says so. It is repaired when it follows a leader.
		rm.logger.Error().Str("topic", t.Topic).Int32("partition", t.Partition).Int64("damaged_offset", d.Offset).Str("log_dir", dir).
			Msg("refusing to move a log damaged below its recovery point: it is repaired when it follows a live leader")
		return ErrStorageError
	}
	curDir, _ := rm.logs.DirOf(t)
	futDir, moving := rm.logs.FutureDirOf(t)
	switch {
	case moving && futDir == dir:
		return ErrNone // already on its way there
	case moving:
		// Moving back to the current dir, or elsewhere: the copy in
		// progress is abandoned first.
		if code := rm.abortMoveLocked(t); code != ErrNone {
			return code
		}
	}
	if curDir == dir {
		return ErrNone
	}
	fut, err := rm.logs.GetOrCreateFutureLog(t, dir)
	if err != nil {
		rm.logger.Error().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Str("log_dir", dir).Msg("create future log")
		if errors.Is(err, logmgr.ErrDirNotFound) {
			return ErrLogDirNotFound
		}
		return ErrStorageError
	}
	if !rm.shuttingDown.Load() {
		rm.alterLogDirsFetchers().AddFetcherForPartitions(ctx, map[tp.TopicPartition]InitialFetchState{
			t: {Leader: rm.localBroker(), LeaderEpoch: p.LeaderEpoch(), InitOffset: fut.LogEndOffset()},
		})
	}
	return ErrNone
}

// abortMoveLocked stops a move in progress and deletes its future log.
func (rm *ReplicaManager) abortMoveLocked(t tp.TopicPartition) ErrorCode {
	rm.alterLogDirsFetchers().RemoveFetcherForPartitions([]tp.TopicPartition{t})
	if err := rm.logs.DeleteFutureLog(t); err != nil {
		rm.logger.Error().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Msg("delete future log")
		return ErrStorageError
	}
	return ErrNone
}

func (rm *ReplicaManager) alterLogDirsFetchers() FetcherManager { return rm.cfg.AlterLogDirsFetchers }

// addFutureReplicaFetchersLocked is the seed's future-replica step of
// becomeLeaderOrFollower: each updated partition with a future log goes (back)
// to the alter-log-dirs fetcher, at the future log's end offset, with the
// partition's new leader epoch. stateChangeMu is held.
func (rm *ReplicaManager) addFutureReplicaFetchersLocked(ctx context.Context, updated []*Partition) {
	if rm.shuttingDown.Load() {
		return
	}
	initial := make(map[tp.TopicPartition]InitialFetchState)
	for _, p := range updated {
		fut, ok := rm.logs.FutureLog(p.topicPartition)
		if !ok || p.Log() == nil {
			continue
		}
		initial[p.topicPartition] = InitialFetchState{Leader: rm.localBroker(), LeaderEpoch: p.LeaderEpoch(), InitOffset: fut.LogEndOffset()}
	}
	if len(initial) > 0 {
		rm.alterLogDirsFetchers().AddFetcherForPartitions(ctx, initial)
	}
}

// FutureReplicaLog returns the future log of a partition being moved, with a
// function reading the partition's leader epoch, for the alter-log-dirs
// fetcher (which drops its state when the epoch moves on; the next
// LeaderAndIsr adds it back).
func (rm *ReplicaManager) FutureReplicaLog(t tp.TopicPartition) (*log.Log, func() int32, bool) {
	p, code := rm.onlinePartition(t)
	if code != ErrNone {
		return nil, nil, false
	}
	fut, ok := rm.logs.FutureLog(t)
	if !ok {
		return nil, nil, false
	}
	return fut, p.LeaderEpoch, true
}

// FetchFromCurrentLog is the local source of the alter-log-dirs fetchers: it
// answers a fetch of future logs from the current logs of the same broker,
// from fetch_offset up to the log end offset, with the checks a leader makes
// (diverging epoch, offset out of range) so that a current log truncated by
// its leader truncates the future log too. A partition whose future log has
// caught up is queued for the swap. When nothing is to be read it waits up to
// MaxWait for an append.
func (rm *ReplicaManager) FetchFromCurrentLog(ctx context.Context, req FetchRequest) FetchResponse {
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultFetchMaxBytes
	}
	var wake chan struct{}
	if req.MaxWait > 0 {
		wake = make(chan struct{}, 1)
		for _, fp := range req.Partitions {
			if p, code := rm.onlinePartition(fp.TopicPartition); code == ErrNone {
				p.changed.watch(wake)
				defer p.changed.unwatch(wake)
			}
		}
	}
	resp, n := rm.readCurrentLogs(req, maxBytes)
	if wake == nil || n > 0 || needsAnswerNow(resp) {
		return resp
	}
	expired := make(chan struct{})
	timer := rm.cfg.Clock.AfterFunc(req.MaxWait, func() { close(expired) })
	defer timer.Stop()
	select {
	case <-wake:
	case <-expired:
	case <-ctx.Done():
		return resp
	case <-rm.stopCh:
		return resp
	}
	resp, _ = rm.readCurrentLogs(req, maxBytes)
	return resp
}

// readCurrentLogs reads each partition's current log for its future log.
func (rm *ReplicaManager) readCurrentLogs(req FetchRequest, maxBytes int) (FetchResponse, int) {
	resp := FetchResponse{Partitions: make([]FetchPartitionResult, len(req.Partitions))}
	total := 0
	for i, fp := range req.Partitions {
		res := FetchPartitionResult{TopicPartition: fp.TopicPartition, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
		p, code := rm.onlinePartition(fp.TopicPartition)
		if code != ErrNone {
			res.Error = code
		} else {
			var caughtUp bool
			var err error
			res, caughtUp, err = p.readForFutureReplica(fp, max(0, maxBytes-total))
			if err != nil {
				rm.handleReadError(context.Background(), fp.TopicPartition, err)
			}
			if caughtUp {
				rm.requestMoveCheck(fp.TopicPartition)
			}
		}
		total += len(res.Records)
		resp.Partitions[i] = res
	}
	return resp, total
}

// readForFutureReplica reads the current log for the future replica.
// caughtUp reports that the future log holds everything the current log does.
func (p *Partition) readForFutureReplica(fp FetchPartition, maxBytes int) (res FetchPartitionResult, caughtUp bool, err error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	res = FetchPartitionResult{TopicPartition: fp.TopicPartition, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
	if p.stopped || p.log == nil {
		res.Error = ErrNotLeaderOrFollower
		return res, false, nil
	}
	if fp.CurrentLeaderEpoch >= 0 && fp.CurrentLeaderEpoch < p.leaderEpoch {
		res.Error = ErrFencedLeaderEpoch
		return res, false, nil
	}
	l := p.log
	leo := l.LogEndOffset()
	res.HighWatermark, res.LogStartOffset, res.LogEndOffset = l.HighWatermark(), l.LogStartOffset(), leo
	if res.DivergingEpoch = p.divergingEpochLocked(fp.FetchOffset, fp.LastFetchedEpoch, leo); res.DivergingEpoch != nil {
		return res, false, nil
	}
	if fp.FetchOffset < res.LogStartOffset || fp.FetchOffset > leo {
		res.Error = ErrOffsetOutOfRange
		return res, false, nil
	}
	if fp.FetchOffset == leo {
		return res, true, nil
	}
	if maxBytes > 0 {
		data, code, err := readVerified(l, fp.FetchOffset, maxBytes, leo)
		if code != ErrNone {
			res.Error, res.LogStartOffset = code, l.LogStartOffset()
			return res, false, err
		}
		res.Records = data
	}
	return res, false, nil
}

// requestMoveCheck queues t for the swap check, run by moveCheckLoop.
func (rm *ReplicaManager) requestMoveCheck(t tp.TopicPartition) {
	rm.moveChecksMu.Lock()
	if rm.moveChecks == nil {
		rm.moveChecks = make(map[tp.TopicPartition]struct{})
	}
	rm.moveChecks[t] = struct{}{}
	rm.moveChecksMu.Unlock()
	select {
	case rm.moveCheckWake <- struct{}{}:
	default:
	}
}

// moveCheckLoop runs the queued swap checks. They run here, not on the
// fetcher that found the future log caught up: a swap removes that fetcher's
// partition, which must not wait on the fetcher itself.
func (rm *ReplicaManager) moveCheckLoop() {
	defer rm.wg.Done()
	for {
		select {
		case <-rm.stopCh:
			return
		case <-rm.moveCheckWake:
		}
		rm.moveChecksMu.Lock()
		checks := rm.moveChecks
		rm.moveChecks = nil
		rm.moveChecksMu.Unlock()
		for t := range checks {
			rm.maybeReplaceCurrentWithFutureReplica(t)
		}
	}
}

// maybeReplaceCurrentWithFutureReplica swaps in the future log of t once it
// holds everything the current log does (Kafka's
// Partition.maybeReplaceCurrentWithFutureReplica). The alter-log-dirs fetcher,
// and on a follower the replica fetcher, are removed first so that nothing
// writes to either log but the leader's appends, which the partition's write
// lock keeps out while the logs are compared and swapped. If the future log
// is still behind, the fetchers are added back and the move goes on.
func (rm *ReplicaManager) maybeReplaceCurrentWithFutureReplica(t tp.TopicPartition) {
	// No HW checkpoint runs during the swap: the partition is briefly in
	// neither of the log manager's maps, and a checkpoint then would drop
	// its HW from both dirs' files. (Order: checkpointMu, then stateChangeMu,
	// as a failed checkpoint write takes them.)
	rm.checkpointMu.Lock()
	defer rm.checkpointMu.Unlock()
	rm.stateChangeMu.Lock()
	defer rm.stateChangeMu.Unlock()
	if rm.shuttingDown.Load() {
		return
	}
	p, code := rm.onlinePartition(t)
	if code != ErrNone {
		return
	}
	if _, ok := rm.logs.FutureLog(t); !ok {
		return
	}
	parts := []tp.TopicPartition{t}
	rm.alterLogDirsFetchers().RemoveFetcherForPartitions(parts)
	p.mu.RLock()
	follower := !p.isLeaderLocked()
	p.mu.RUnlock()
	if follower {
		rm.cfg.Fetchers.RemoveFetcherForPartitions(parts)
	}
	swapped, err := p.replaceCurrentWithFutureLog()
	switch {
	case errors.Is(err, errFutureCopy):
		// The future log failed, the current one is intact: the move stops.
		// The future log reported its failure itself (its dir goes offline).
		rm.logger.Error().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Msg("finish log dir move")
	case err != nil:
		// The swap failed half way: the partition may have no log left.
		rm.logger.Error().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Msg("swap in the moved log")
		rm.markPartitionOffline(context.Background(), t, offlineSwapFailed, err)
		return
	case !swapped:
		if fut, ok := rm.logs.FutureLog(t); ok {
			rm.alterLogDirsFetchers().AddFetcherForPartitions(context.Background(), map[tp.TopicPartition]InitialFetchState{
				t: {Leader: rm.localBroker(), LeaderEpoch: p.LeaderEpoch(), InitOffset: fut.LogEndOffset()},
			})
		}
	default:
		rm.alterLogDirsFetchers().ShutdownIdleFetchers()
		dir, _ := rm.logs.DirOf(t)
		rm.stateLog.Info().Str("topic", t.Topic).Int32("partition", t.Partition).Str("log_dir", dir).Msg("moved replica to its new log dir")
	}
	if follower {
		p.mu.RLock()
		leader, epoch, l := p.leader, p.leaderEpoch, p.log
		p.mu.RUnlock()
		if b, ok := rm.metadata.aliveBroker(leader); ok && l != nil {
			rm.cfg.Fetchers.AddFetcherForPartitions(context.Background(), map[tp.TopicPartition]InitialFetchState{
				t: {Leader: b, LeaderEpoch: epoch, InitOffset: l.LogEndOffset()},
			})
		}
	}
	p.changed.notify()
}

// errFutureCopy marks a failure of the future log while finishing a move.
var errFutureCopy = errors.New("copy to future log")

// replaceCurrentWithFutureLog swaps the future log in, under the write lock,
// when it holds the same records as the current log (same LEO and the same
// epoch at every offset), copying a short tail itself first. A future log that
// diverges from the current one is truncated where it does instead, and the
// copy goes on. Nothing but this broker's leader appends (kept out by the
// lock) may write to the logs meanwhile.
func (p *Partition) replaceCurrentWithFutureLog() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := p.topicPartition
	fut, ok := p.env.logs.FutureLog(t)
	if !ok || p.log == nil || p.stopped {
		return false, nil
	}
	cur := p.log
	if _, damaged := cur.Damaged(); damaged {
		return false, nil // never swapped in for a damaged log (see alterReplicaLogDirLocked)
	}
	if err := fut.Failed(); err != nil {
		// Its writes since the failure may be lost: the move stops, the
		// current log stays (the future's dir goes offline).
		return false, fmt.Errorf("%w: %w", errFutureCopy, err)
	}
	if err := p.copyTailLocked(cur, fut); err != nil {
		return false, err
	}
	if fut.LogEndOffset() != cur.LogEndOffset() {
		return false, nil
	}
	if start := cur.LogStartOffset(); fut.LogStartOffset() < start {
		// DeleteRecords raised the current log's start since the future
		// log copied those records: they go from it too before it is
		// swapped in, or they would come back with it.
		fut.UpdateHighWatermark(cur.HighWatermark())
		if _, err := fut.IncrementLogStartOffset(start); err != nil {
			return false, fmt.Errorf("%w: raise log start to %d: %w", errFutureCopy, start, err)
		}
	}
	if fut.LogStartOffset() > cur.LogStartOffset() {
		return false, nil
	}
	// Equal LEOs are not enough: since the fetch that found the future log
	// caught up, the replica fetcher may have truncated the current log on a
	// diverging epoch and appended the new leader's records up to the same
	// LEO. The future log would then still hold the old epoch's records.
	if d, diverged := epochDivergence(cur, fut); diverged {
		return false, p.truncateDivergedFutureLocked(fut, d)
	}
	hw := cur.HighWatermark()
	moved, err := p.env.logs.ReplaceCurrentWithFutureLog(t, hw)
	if err != nil {
		p.log = nil
		return false, err
	}
	p.log = moved
	// The moved log was opened with the broker's roll rules: give it the
	// topic's (segment.bytes, segment.ms).
	if err := moved.SetRoll(p.topicConfig.SegmentBytes, p.topicConfig.SegmentMs); err != nil {
		p.env.logger.Warn().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Msg("could not apply segment.bytes / segment.ms to the moved log")
	}
	if p.isLeaderLocked() && p.leaderEpochStartOffset >= 0 {
		// The epoch this broker leads may have no batch yet, so the copy
		// never saw it: cache it again, as makeLeader did.
		if err := moved.MaybeAssignEpochStartOffset(p.leaderEpoch, p.leaderEpochStartOffset); err != nil {
			return true, fmt.Errorf("assign epoch %d start %d: %w", p.leaderEpoch, p.leaderEpochStartOffset, err)
		}
	}
	return true, nil
}

// truncateDivergedFutureLocked cuts the future log at d, the first offset at
// which its records' epochs differ from the current log's; the
// alter-log-dirs fetcher, added back by the caller, copies the current log's
// records from there.
func (p *Partition) truncateDivergedFutureLocked(fut *log.Log, d int64) error {
	t := p.topicPartition
	p.env.logger.Warn().Str("topic", t.Topic).Int32("partition", t.Partition).Int64("offset", d).
		Int64("log_end_offset", fut.LogEndOffset()).
		Msg("future log diverges from the current log at an equal log end offset: truncating it instead of swapping it in")
	// The truncation has the future's dir checkpoint its lowered recovery
	// point first (logmgr).
	if err := fut.TruncateTo(d); err != nil {
		return fmt.Errorf("%w: truncate diverged future log to %d: %w", errFutureCopy, d, err)
	}
	return nil
}

// epochDivergence compares the leader epochs of the records cur and fut hold,
// which have the same log end offset, over the offsets both hold (from the
// higher log start offset up to the LEO). Epoch cache entries starting at or
// after the LEO cover no record and are left out: a leader's freshly assigned
// epoch is one. Two logs agreeing on the epoch of every offset hold the same
// records. It returns the first offset whose epoch differs.
func epochDivergence(cur, fut *log.Log) (int64, bool) {
	lo, hi := max(cur.LogStartOffset(), fut.LogStartOffset()), cur.LogEndOffset()
	if lo >= hi {
		return 0, false
	}
	a := epochRuns(cur.EpochCache().Entries(), lo, hi)
	b := epochRuns(fut.EpochCache().Entries(), lo, hi)
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			// They agree up to the earlier of the two starts (the first
			// runs both start at lo).
			return min(a[i].StartOffset, b[i].StartOffset), true
		}
	}
	switch {
	case len(a) > len(b):
		return a[len(b)].StartOffset, true
	case len(b) > len(a):
		return b[len(a)].StartOffset, true
	}
	return 0, false
}

// epochRuns restricts epoch cache entries to [lo, hi): the epoch at lo
// (epoch.Undefined when none covers it) starting at lo, then the entries
// starting inside the range.
func epochRuns(entries []checkpoint.EpochEntry, lo, hi int64) []checkpoint.EpochEntry {
	runs := []checkpoint.EpochEntry{{Epoch: epoch.Undefined, StartOffset: lo}}
	for _, e := range entries {
		switch {
		case e.StartOffset <= lo:
			runs[0].Epoch = e.Epoch
		case e.StartOffset < hi:
			runs = append(runs, e)
		}
	}
	return runs
}

// copyTailLocked appends to fut the batches of cur it lacks, when they are
// few (maxTailCopyBytes) and fut does not diverge from cur.
func (p *Partition) copyTailLocked(cur, fut *log.Log) error {
	from, to := fut.LogEndOffset(), cur.LogEndOffset()
	if from >= to || from < cur.LogStartOffset() || p.divergingEpochLocked(from, fut.LatestEpoch(), to) != nil {
		return nil
	}
	ri, err := cur.Read(from, maxTailCopyBytes, to)
	if err != nil {
		return nil // the fetcher will find out
	}
	data := completeBatches(ri.Data)
	if len(data) == 0 || lastNextOffset(data) != to {
		return nil // too much left: the fetcher goes on
	}
	if _, err := fut.AppendAsFollower(data); err != nil {
		return fmt.Errorf("%w: %w", errFutureCopy, err)
	}
	return nil
}

// completeBatches cuts data after its last complete batch.
func completeBatches(data []byte) []byte {
	n := 0
	for rest := data; len(rest) > 0; {
		_, next, err := record.Next(rest)
		if err != nil {
			break
		}
		n += len(rest) - len(next)
		rest = next
	}
	return data[:n]
}

// lastNextOffset is the offset after the last batch of data (complete batches).
func lastNextOffset(data []byte) int64 {
	var next int64 = -1
	for rest := data; len(rest) > 0; {
		b, r, err := record.Next(rest)
		if err != nil {
			break
		}
		next = b.NextOffset()
		rest = r
	}
	return next
}
