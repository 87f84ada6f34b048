package core

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/core/tp"
)

// noLeader is the leader id of a partition that has none (Kafka's -1).
const noLeader int32 = -1

// unknownOffset marks a remote replica whose log end offset the leader has not
// learned yet in this leader epoch.
const unknownOffset int64 = -1

// partitionEnv is what every Partition of a broker shares.
type partitionEnv struct {
	brokerID int32
	clock    clock.Clock
	logs     *logmgr.Manager
	// topicDefaults is the topic config of a partition whose topic
	// overrides nothing: the broker's flags.
	topicDefaults topicconfig.Config
	logger        zerolog.Logger
	// stateLog is the state-change logger (logger=state.change).
	stateLog zerolog.Logger
	// isrChanger commits the ISR changes a leader proposes.
	isrChanger IsrChanger
	// metrics counts committed ISR changes; never nil in a replica
	// manager's env (noMetrics when off).
	metrics MetricsRecorder
	// tracer records the leader's ISR changes (Partition.shrinkIsr,
	// Partition.expandIsr); never nil in a replica manager's env.
	tracer trace.Tracer
}

// replicaState is the leader's view of a follower (Kafka's Replica, kept in
// Partition.remoteReplicas on the leader).
type replicaState struct {
	brokerID     int32
	logEndOffset int64 // unknownOffset until the follower fetches in this epoch
	// lastCaughtUpTime is the last time the follower's fetch reached the
	// leader's LEO as of that fetch; the ISR shrink check measures lag from it.
	lastCaughtUpTime            time.Time
	lastFetchTime               time.Time
	lastFetchLeaderLogEndOffset int64
	brokerEpoch                 int64 // newest the follower sent; -1 until it sends one
	// logStartOffset is the follower's log start as its last fetch said;
	// unknownOffset until it fetches in this epoch (DeleteRecords waits
	// for the ISR's).
	logStartOffset int64
}

// resetForNewEpoch forgets what the follower told a previous leader epoch.
func (r *replicaState) resetForNewEpoch(now time.Time, inISR bool) {
	r.logEndOffset = unknownOffset
	r.logStartOffset = unknownOffset
	r.lastFetchTime = time.Time{}
	r.lastFetchLeaderLogEndOffset = unknownOffset
	if inISR {
		r.lastCaughtUpTime = now
	} else {
		r.lastCaughtUpTime = time.Time{}
	}
}

// Partition is this broker's replica of one partition and, on the leader, its
// view of the other replicas (Kafka's Partition).
type Partition struct {
	topicPartition tp.TopicPartition
	env            *partitionEnv

	// mu is Kafka's leaderIsrUpdateLock: writers change leadership, readers
	// append and read so that leadership cannot change under them.
	mu              sync.RWMutex
	controllerEpoch int32
	leaderEpoch     int32
	// leaderEpochStartOffset is the LEO when this broker became leader of
	// leaderEpoch; -1 on a follower.
	leaderEpochStartOffset int64
	partitionEpoch         int32
	leader                 int32 // noLeader when unknown
	// topicID is the partition's topic ID: the controller's, or its log's
	// when the controller has not named one. "" when unknown.
	topicID    string
	assignment []int32
	// adding are the replicas a reassignment in flight adds, the only ones
	// the replication throttle holds back (throttle.go).
	adding []int32
	isr    []int32 // sorted; empty on a follower; committed only
	// pendingIsr is the ISR change in flight (at most one), nil when none.
	pendingIsr     *pendingIsrChange
	remoteReplicas map[int32]*replicaState
	log            *log.Log
	// topicConfig is the topic's config in effect here (the broker's
	// defaults with the topic's overrides), as of topicConfigVersion of
	// topicConfigID (see applyTopicConfigLocked).
	topicConfig        topicconfig.Config
	topicConfigVersion int64
	topicConfigID      string
	// stopped is set when the replica manager stops hosting the partition;
	// waiters must give up.
	stopped bool

	// changed wakes waiters (acks=-1 produces, long-polling reads) when the HW
	// moves, the log grows, or leadership changes.
	changed notifier
}

func newPartition(t tp.TopicPartition, env *partitionEnv) *Partition {
	return &Partition{
		topicPartition:         t,
		env:                    env,
		leaderEpoch:            -1,
		leaderEpochStartOffset: -1,
		leader:                 noLeader,
		controllerEpoch:        -1,
		remoteReplicas:         make(map[int32]*replicaState),
		topicConfig:            env.topicDefaults,
	}
}

// TopicPartition names the partition.
func (p *Partition) TopicPartition() tp.TopicPartition { return p.topicPartition }

// LeaderEpoch returns the partition's current leader epoch (-1 before the first LeaderAndIsr).
func (p *Partition) LeaderEpoch() int32 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.leaderEpoch
}

// leaderAndEpochs returns the partition's leader, leader epoch and
// partition epoch.
func (p *Partition) leaderAndEpochs() (leader, leaderEpoch, partitionEpoch int32) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.leader, p.leaderEpoch, p.partitionEpoch
}

// TopicID is the partition's topic ID ("" when unknown).
func (p *Partition) TopicID() string {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.topicID
}

// Log returns the local log, nil before it is created.
func (p *Partition) Log() *log.Log {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.log
}

// isLeaderLocked reports whether this broker leads the partition.
func (p *Partition) isLeaderLocked() bool { return p.leader == p.env.brokerID }

// updateAssignmentAndIsrLocked stores the replica set (and those of it a
// reassignment adds) and ISR, and keeps one remote replica state per other
// assigned broker.
func (p *Partition) updateAssignmentAndIsrLocked(replicas, adding, isr []int32) {
	p.assignment = slices.Clone(replicas)
	p.adding = slices.Clone(adding)
	p.isr = sortedSet(isr)
	// The controller's ISR replaces whatever this broker proposed: an answer
	// to that proposal arriving later is ignored.
	p.pendingIsr = nil
	keep := make(map[int32]bool, len(replicas))
	for _, id := range replicas {
		if id == p.env.brokerID {
			continue
		}
		keep[id] = true
		if _, ok := p.remoteReplicas[id]; !ok {
			p.remoteReplicas[id] = &replicaState{brokerID: id, logEndOffset: unknownOffset, logStartOffset: unknownOffset,
				lastFetchLeaderLogEndOffset: unknownOffset, brokerEpoch: -1}
		}
	}
	for id := range p.remoteReplicas {
		if !keep[id] {
			delete(p.remoteReplicas, id)
		}
	}
}

// createLogIfNotExistsLocked attaches the local log, creating it when missing.
// A log that is not new may only be created while every log dir is online:
// otherwise its data may sit in an offline dir, and an empty replacement would
// pose as the replica (Kafka's LogManager.getOrCreateLog rule).
func (p *Partition) createLogIfNotExistsLocked(isNew, syncMetadata bool) error {
	if p.log != nil {
		return p.adoptTopicIDLocked()
	}
	if l, ok := p.env.logs.GetLog(p.topicPartition); ok {
		p.log = l
		return p.adoptTopicIDLocked()
	}
	if !isNew {
		for _, d := range p.env.logs.Dirs() {
			if !d.Online {
				return fmt.Errorf("create log %s: log dir %s is offline and may hold it: %w", p.topicPartition, d.Path, log.ErrStorage)
			}
		}
	}
	l, err := p.env.logs.GetOrCreateLogOfTopic(p.topicPartition, p.topicID, syncMetadata)
	if err != nil {
		return fmt.Errorf("create log %s: %w", p.topicPartition, err)
	}
	p.log = l
	return p.adoptTopicIDLocked()
}

// adoptTopicIDLocked reconciles the partition's topic ID with its log's: a
// log from before topic IDs takes the controller's, and a partition the
// controller named none for takes the log's. (A log of another topic ID
// never gets here: BecomeLeaderOrFollower deletes it first.)
func (p *Partition) adoptTopicIDLocked() error {
	logID := p.env.logs.TopicID(p.topicPartition)
	switch {
	case p.topicID == "":
		p.topicID = logID
	case logID == "":
		if err := p.env.logs.SetTopicID(p.topicPartition, p.topicID); err != nil {
			return fmt.Errorf("record topic ID of %s: %w", p.topicPartition, err)
		}
	}
	return nil
}

// makeLeader makes this broker the partition's leader (Kafka's
// Partition.makeLeader). It reports whether the broker was not the leader
// before. A storage error leaves the partition for the caller to take offline.
func (p *Partition) makeLeader(st PartitionState, syncMetadata bool) (isNewLeader bool, err error) {
	isNewLeader, err = p.makeLeaderLocked(st, syncMetadata)
	if err != nil {
		return false, err
	}
	if flushed, err := p.flushRecovered(); err != nil {
		return false, err
	} else if flushed {
		p.mu.Lock()
		p.maybeIncrementLeaderHWLocked()
		p.mu.Unlock()
	}
	// The seed completes delayed requests only when the HW moved; waking on any
	// leadership change is a superset that costs one channel close.
	p.changed.notify()
	return isNewLeader, nil
}

func (p *Partition) makeLeaderLocked(st PartitionState, syncMetadata bool) (isNewLeader bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// A log damaged below its recovery point lacks committed records its
	// ISR peers have: leading would truncate them from every follower. It
	// refuses, changing nothing, and the controller, answered
	// STORAGE_ERROR, elects another replica (see log.Damaged).
	// The log may not be the partition's yet (the first LeaderAndIsr after a
	// restart): the log manager opened it.
	if l, ok := p.env.logs.GetLog(p.topicPartition); ok {
		if d, ok := l.Damaged(); ok {
			p.log = l // the partition's all the same: it is not offline
			return false, fmt.Errorf("%w: refusing leadership at epoch %d: the log is damaged at offset %d, below its recovery point %d: %w",
				log.ErrDamaged, st.LeaderEpoch, d.Offset, d.RecoveryPoint, d.Cause)
		}
	}
	// Record the epoch of the controller that made the decision.
	p.controllerEpoch = st.ControllerEpoch
	p.updateAssignmentAndIsrLocked(st.Replicas, st.AddingReplicas, st.ISR)
	p.topicID = cmp.Or(st.TopicID, p.topicID)
	if err := p.createLogIfNotExistsLocked(st.IsNew, syncMetadata); err != nil {
		return false, err
	}
	p.applyTopicConfigLocked(st)
	isNewLeaderEpoch := st.LeaderEpoch > p.leaderEpoch
	isNewLeader = !p.isLeaderLocked()
	p.partitionEpoch = st.PartitionEpoch
	if isNewLeaderEpoch || isNewLeader {
		leaderEpochStartOffset := p.log.LogEndOffset()
		p.env.logger.Info().Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
			Int32("leader_epoch", st.LeaderEpoch).Int32("previous_leader_epoch", p.leaderEpoch).
			Int64("epoch_start_offset", leaderEpochStartOffset).Int64("high_watermark", p.log.HighWatermark()).
			Msg("starting at new leader epoch")
		p.leaderEpoch = st.LeaderEpoch
		p.leaderEpochStartOffset = leaderEpochStartOffset
		// Cache the new epoch and its start offset before any append: a
		// follower with entries from a later epoch than any in this log
		// must still be able to find where to truncate (KIP-101).
		if err := p.log.MaybeAssignEpochStartOffset(p.leaderEpoch, leaderEpochStartOffset); err != nil {
			return false, fmt.Errorf("assign epoch %d start %d: %w", p.leaderEpoch, leaderEpochStartOffset, err)
		}
	}
	// Otherwise this is the same leadership at a newer partition epoch (the
	// controller refreshing the ISR, see BecomeLeaderOrFollower): the epoch
	// began where it began, and moving its start offset to the LEO would let
	// a follower below it into the ISR too late or with the wrong check
	// (KAFKA-7128).
	//
	// What followers told an older epoch's leader (possibly this broker) says
	// nothing about their logs now; reset only when the epoch moved, so a
	// repeated request at the same epoch keeps the followers' progress.
	if isNewLeaderEpoch {
		now := p.env.clock.Now()
		for id, r := range p.remoteReplicas {
			r.resetForNewEpoch(now, slices.Contains(p.isr, id))
		}
	}
	p.leader = p.env.brokerID
	// The ISR may be down to this broker alone, so the HW may move now.
	p.maybeIncrementLeaderHWLocked()
	return isNewLeader, nil
}

// makeFollower makes this broker a follower (Kafka's Partition.makeFollower).
// It reports whether the leader or the leader epoch changed: only then must
// the fetcher be restarted.
func (p *Partition) makeFollower(st PartitionState, syncMetadata bool) (changed bool, err error) {
	changed, err = p.makeFollowerLocked(st, syncMetadata)
	if err == nil {
		// Its LEO is what it tells the leader it holds.
		_, err = p.flushRecovered()
	}
	if err == nil {
		p.changed.notify()
	}
	return changed, err
}

// flushRecovered fsyncs what the log holds past its durable end, when its
// flush policy makes only durable records committable (every-batch): after
// a crash, recovery keeps the records the page cache had, unflushed, and
// the HW would wait below them until the next append. It reports whether
// it flushed. Outside p.mu: the fetches of the partition go on meanwhile.
func (p *Partition) flushRecovered() (bool, error) {
	l := p.Log()
	if l == nil || l.DurableEndOffset() >= l.LogEndOffset() {
		return false, nil
	}
	if err := l.Flush(); err != nil {
		return false, fmt.Errorf("flush %s past its recovery point: %w", p.topicPartition, err)
	}
	return true, nil
}

func (p *Partition) makeFollowerLocked(st PartitionState, syncMetadata bool) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	oldLeaderEpoch := p.leaderEpoch
	p.controllerEpoch = st.ControllerEpoch
	// A follower keeps the assignment but no ISR: only the leader tracks it.
	p.updateAssignmentAndIsrLocked(st.Replicas, st.AddingReplicas, nil)
	p.topicID = cmp.Or(st.TopicID, p.topicID)
	if err := p.createLogIfNotExistsLocked(st.IsNew, syncMetadata); err != nil {
		return false, err
	}
	p.applyTopicConfigLocked(st)
	p.leaderEpoch = st.LeaderEpoch
	p.leaderEpochStartOffset = -1
	p.partitionEpoch = st.PartitionEpoch
	if p.leader == st.Leader && p.leaderEpoch == oldLeaderEpoch {
		return false, nil
	}
	p.leader = st.Leader
	return true, nil
}

// createLogOnly creates the local log without a role change, so that the
// partition's HW stays in the checkpoint file even while its leader is
// unavailable (KAFKA-1647).
func (p *Partition) createLogOnly(st PartitionState, syncMetadata bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.topicID = cmp.Or(st.TopicID, p.topicID)
	if err := p.createLogIfNotExistsLocked(st.IsNew, syncMetadata); err != nil {
		return err
	}
	p.applyTopicConfigLocked(st)
	return nil
}

// maybeIncrementLeaderHWLocked moves the leader's HW to the smallest LEO in
// the maximal ISR, the leader's own counting only as far as it is durable
// under its flush policy (log.DurableEndOffset) (the committed ISR plus an expansion in flight). It never
// moves the HW backwards, and does not move it while the committed ISR is
// smaller than the effective min.insync.replicas or while an ISR member's
// LEO is unknown in this epoch. p.mu must be held for writing.
//
// The committed ISR, not the maximal one, is held to the minimum (Kafka's
// isUnderMinIsr with ELR): the controller keeps the replicas that left an
// ISR below the minimum as eligible leaders (KIP-966) because the HW cannot
// move then; an expansion that only this leader counts yet must not move
// the HW past what they hold.
func (p *Partition) maybeIncrementLeaderHWLocked() bool {
	isr := p.maximalIsrLocked()
	if !p.isLeaderLocked() || p.log == nil || len(p.isr) < p.effectiveMinIsrLocked() {
		return false
	}
	// The leader's own share is what it made durable, not its LEO: under
	// --log-flush every-batch an append is fsynced before it is
	// acknowledged, and a record a consumer has read must survive a power
	// loss just the same. Group commit otherwise let the HW pass appends
	// whose fsync had not run yet (issue 19, path 6). The followers' LEOs
	// count as they are: a follower fetches its next offset only once its
	// previous append is flushed, under the same policy.
	newHW := p.log.DurableEndOffset()
	for _, id := range isr {
		if id == p.env.brokerID {
			continue
		}
		r, ok := p.remoteReplicas[id]
		if !ok || r.logEndOffset == unknownOffset {
			return false
		}
		newHW = min(newHW, r.logEndOffset)
	}
	if newHW <= p.log.HighWatermark() {
		return false
	}
	p.log.UpdateHighWatermark(newHW)
	return true
}

// effectiveMinIsrLocked is Kafka's effective min ISR (Partition.effectiveMinIsr):
// min.insync.replicas, but never more than the partition's replicas. A
// partition with fewer replicas than the broker's minimum (an RF=1 topic on a
// broker with --min-insync-replicas 2) would otherwise never move its HW:
// its acks=1 writes would be appended and never seen by a consumer.
func (p *Partition) effectiveMinIsrLocked() int {
	return max(1, min(p.topicConfig.MinInsyncReplicas, len(p.assignment)))
}

// stop marks the partition as no longer hosted and wakes its waiters, which
// then complete with NOT_LEADER_OR_FOLLOWER.
func (p *Partition) stop() {
	p.mu.Lock()
	p.stopped = true
	p.leader = noLeader
	p.mu.Unlock()
	p.changed.notify()
}

// info describes the replica. role is decided by the caller for offline ones.
func (p *Partition) info() PartitionInfo {
	p.mu.RLock()
	defer p.mu.RUnlock()
	in := PartitionInfo{
		TopicPartition:  p.topicPartition,
		Leader:          p.leader,
		LeaderEpoch:     p.leaderEpoch,
		PartitionEpoch:  p.partitionEpoch,
		ControllerEpoch: p.controllerEpoch,
		Replicas:        slices.Clone(p.assignment),
		ISR:             slices.Clone(p.isr),
		HighWatermark:   -1,
		LogEndOffset:    -1,
		LogStartOffset:  -1,
		TopicID:         p.topicID,

		TopicConfig:        p.topicConfig,
		TopicConfigVersion: p.topicConfigVersion,
	}
	switch {
	case p.isLeaderLocked():
		in.Role = RoleLeader
	default:
		in.Role = RoleFollower
	}
	if p.log != nil {
		in.HighWatermark = p.log.HighWatermark()
		in.LogEndOffset = p.log.LogEndOffset()
		in.LogStartOffset = p.log.LogStartOffset()
		in.LogDir, _ = p.env.logs.DirOf(p.topicPartition)
		in.FutureLogDir, _ = p.env.logs.FutureDirOf(p.topicPartition)
		if d, ok := p.log.Damaged(); ok {
			in.DamagedOffset = &d.Offset
		}
		in.ProducerCount, in.Producers = p.log.Producers(MaxDescribedProducers)
	}
	return in
}

// appendRecordsToLeader appends a batch on the leader (Kafka's
// Partition.appendRecordsToLeader). It returns the append and the leader
// epoch it happened in.
func (p *Partition) appendRecordsToLeader(batch record.Batch, acks int) (log.AppendInfo, int32, ErrorCode, error) {
	p.mu.RLock()
	if !p.isLeaderLocked() || p.log == nil {
		p.mu.RUnlock()
		return log.AppendInfo{}, 0, ErrNotLeaderOrFollower, nil
	}
	if acks == AcksAll && len(p.isr) < p.effectiveMinIsrLocked() {
		p.mu.RUnlock()
		return log.AppendInfo{}, 0, ErrNotEnoughReplicas, nil
	}
	epoch := p.leaderEpoch
	l := p.log
	info, err := l.AppendAsLeaderUnflushed(batch, epoch)
	if code := producerErrorCode(err); code != ErrNone {
		p.mu.RUnlock()
		return info, epoch, code, err
	}
	if err == nil && info.Duplicate && info.LastOffset >= l.HighWatermark() {
		// Not committed yet: the acks=-1 wait is the original batch's, in
		// its epoch, and fails as the original's would when a truncation
		// replaces it. p.mu is held: no truncation runs meanwhile. (A
		// committed original needs no wait, and may be below the log
		// start, where the epoch cache no longer reaches.)
		epoch = l.EpochCache().EpochForOffset(info.FirstOffset)
	}
	p.mu.RUnlock()
	if err == nil && info.Fenced {
		prod := batch.Producer()
		p.producerFenced(prod.ID, prod.Epoch, info.FencedEpoch, epoch, info.FirstOffset)
	}
	if err == nil {
		// Outside p.mu: a follower fetch or a LeaderAndIsr waiting to write
		// the partition state must not wait for this fsync.
		err = l.WaitFlushed(info)
	}
	if err != nil {
		return info, epoch, storageErrorCode(err), err
	}
	p.mu.Lock()
	p.maybeIncrementLeaderHWLocked()
	p.mu.Unlock()
	p.changed.notify()
	return info, epoch, ErrNone, nil
}

// checkEnoughReplicasReachOffset is the completion check of a delayed acks=-1
// produce (Kafka's Partition.checkEnoughReplicasReachOffset): done when the
// HW passed requiredOffset, or when this broker no longer leads, or when the
// appended batch is gone from the log (truncated away by a later epoch).
func (p *Partition) checkEnoughReplicasReachOffset(baseOffset, requiredOffset int64, appendEpoch int32) (bool, ErrorCode) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped || !p.isLeaderLocked() || p.log == nil {
		return true, ErrNotLeaderOrFollower
	}
	if p.leaderEpoch != appendEpoch && p.log.EpochCache().EpochForOffset(baseOffset) != appendEpoch {
		return true, ErrNotLeaderOrFollower
	}
	if p.log.HighWatermark() < requiredOffset {
		return false, ErrNone
	}
	if len(p.isr) < p.effectiveMinIsrLocked() {
		return true, ErrNotEnoughReplicasAfterAppend
	}
	return true, ErrNone
}

// readCommitted reads records in [offset, HW) from the leader.
func (p *Partition) readCommitted(offset int64, maxBytes int) (ConsumeResult, int, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.stopped || !p.isLeaderLocked() || p.log == nil {
		return ConsumeResult{Error: ErrNotLeaderOrFollower, HighWatermark: -1, LogStartOffset: -1, NextOffset: offset}, 0, nil
	}
	l := p.log
	res := ConsumeResult{HighWatermark: l.HighWatermark(), LogStartOffset: l.LogStartOffset(), NextOffset: offset}
	if offset < res.LogStartOffset || offset > l.LogEndOffset() {
		res.Error = ErrOffsetOutOfRange
		return res, 0, nil
	}
	if offset >= res.HighWatermark {
		return res, 0, nil
	}
	// Every batch is checked before it is served: one damaged at rest is
	// answered CORRUPT_MESSAGE, after the sound ones before it.
	data, code, err := readVerified(l, offset, maxBytes, res.HighWatermark)
	if code != ErrNone {
		res.Error = code
		return res, 0, err
	}
	read := len(data)
	for buf := data; len(buf) > 0; {
		b, rest, err := record.Next(buf)
		if err != nil {
			break // cannot happen: verifyBatches returned whole batches
		}
		buf = rest
		recs, err := b.Records()
		if err != nil {
			res.Error = ErrCorruptMessage
			return res, 0, &corruptBatch{offset: b.BaseOffset(), err: fmt.Errorf("decode records: %w", err)}
		}
		for _, r := range recs {
			if r.Offset >= offset && r.Offset < res.HighWatermark {
				res.Records = append(res.Records, r)
				res.NextOffset = r.Offset + 1
			}
		}
	}
	return res, read, nil
}

// storageErrorCode maps a log error to its protocol code.
func storageErrorCode(err error) ErrorCode {
	switch {
	case err == nil:
		return ErrNone
	case errors.Is(err, log.ErrBatchTooLarge):
		return ErrMessageTooLarge
	case errors.Is(err, log.ErrNameTooLong):
		return ErrInvalidRequest
	case errors.Is(err, log.ErrStorage), errors.Is(err, log.ErrFileLimit), errors.Is(err, log.ErrDamaged), errors.Is(err, logmgr.ErrDirOffline),
		errors.Is(err, logmgr.ErrNoOnlineDir), errors.Is(err, log.ErrClosed):
		return ErrStorageError
	default:
		return ErrUnknownServerError
	}
}

func sortedSet(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
