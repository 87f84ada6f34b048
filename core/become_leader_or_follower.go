package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/internal/spanevents"
)

// BecomeLeaderOrFollower handles a LeaderAndIsr request (Kafka's
// ReplicaManager.becomeLeaderOrFollower), in the seed's three phases under the
// state-change lock:
//
//  1. Fence a request meant for an earlier incarnation of this broker (stale
//     broker epoch) and a stale controller; create missing partitions; check
//     each partition's leader epoch.
//  2. makeLeaders for the partitions this broker now leads, makeFollowers for
//     the rest; take offline the partitions whose log could not be created.
//  3. Start the HW checkpoint loop, start the alter-log-dirs fetchers of
//     replicas being moved, shut down idle fetchers, run the
//     leadership-change callback, and answer every partition's error code.
func (rm *ReplicaManager) BecomeLeaderOrFollower(ctx context.Context, req LeaderAndIsrRequest) LeaderAndIsrResponse {
	ctx, span := rm.tracer.Start(ctx, "ReplicaManager.becomeLeaderOrFollower", trace.WithAttributes(
		attribute.Int("replicad.controller_id", int(req.ControllerID)),
		attribute.Int("replicad.controller_epoch", int(req.ControllerEpoch)),
		attribute.Int64("replicad.broker_epoch", req.BrokerEpoch),
		attribute.Int("replicad.partitions", len(req.PartitionStates)),
	))
	defer span.End()
	slog := rm.requestStateLog(ctx, req.ControllerID, req.ControllerEpoch)
	slog.Info().Int("partitions", len(req.PartitionStates)).Int64("broker_epoch", req.BrokerEpoch).Msg("Handling LeaderAndIsr request")
	for _, st := range req.PartitionStates {
		// A disabled level makes Trace() nil, and every call on it a no-op.
		stateFields(slog.Trace(), st).Ints32("replicas", st.Replicas).Ints32("adding_replicas", st.AddingReplicas).Bool("is_new", st.IsNew).
			Int32("state_controller_epoch", st.ControllerEpoch).Msg("Received LeaderAndIsr request")
	}

	rm.stateChangeMu.Lock()
	defer rm.stateChangeMu.Unlock()

	// Phase 1.
	if rm.isBrokerEpochStale("LeaderAndIsr", req.ControllerID, req.BrokerEpoch) {
		setErrorCode(span, ErrStaleBrokerEpoch)
		return wholeRequestError(req, ErrStaleBrokerEpoch)
	}
	if !rm.acceptControllerEpochLocked("LeaderAndIsr", req.ControllerID, req.ControllerEpoch) {
		setErrorCode(span, ErrStaleControllerEpoch)
		return wholeRequestError(req, ErrStaleControllerEpoch)
	}
	rm.metadata.addLive(req.LiveLeaders)
	// The Metadata view takes the states too: the controller's
	// UpdateMetadata of the same change may come later. A state the
	// partition refuses below (an older leader epoch) is older than the
	// view's as well, and the view keeps its own.
	rm.metadata.updatePartitions(req.PartitionStates)
	rm.learnBrokerEpochs(req.LiveLeaders)

	responses := make(map[tp.TopicPartition]ErrorCode, len(req.PartitionStates))
	var toLeader, toFollower []partitionTransition
	// The partitions ignored are events of this span (within the budget).
	ignored := newPartitionEvents(span)
	if len(req.PartitionStates) > MaxPartitionSpans {
		ignored = spanevents.New(span, MaxIgnoredEvents)
	}
	ignore := func(st PartitionState, code ErrorCode, reason string, current int32) {
		responses[st.TopicPartition] = code
		if ignored.Want() {
			ignored.Add("LeaderAndIsr partition ignored", append(partitionAttrs(st.TopicPartition),
				attribute.String("replicad.reason", reason), attribute.String("replicad.error_code", code.String()),
				attribute.Int("replicad.leader_epoch", int(st.LeaderEpoch)), attribute.Int("replicad.current_leader_epoch", int(current)))...)
		}
	}
	for _, st := range req.PartitionStates {
		t := st.TopicPartition
		if err := tp.ValidateDirName(t); err != nil {
			// A partition this broker can never host: no dir takes its
			// name. The request's fault, so no dir goes offline for it
			// (ENAMETOOLONG from the mkdir would look like a disk failure).
			stateFields(slog.Warn(), st).Err(err).Msg("Ignoring LeaderAndIsr request: the partition's dir name would be too long")
			ignore(st, ErrInvalidRequest, "partition dir name too long", -1)
			continue
		}
		if rm.refuseOverBudget(slog, st) {
			ignore(st, ErrWillExceedPartitionLimits, "over the broker's partition budget", -1)
			continue
		}
		p, created := rm.getOrCreateHostedPartition(t)
		if p == nil {
			stateFields(slog.Warn(), st).Msg("Ignoring LeaderAndIsr request: the local replica is in an offline log dir")
			ignore(st, ErrStorageError, "offline log dir", -1)
			continue
		}
		if stray := rm.strayTopicID(p, st); stray != "" {
			// The replica here is of a topic of the same name that was
			// deleted (while this broker was away): its log is never
			// reused, whatever its epochs say (they restart at 0 with a new
			// topic). It goes, and the partition starts over.
			if code := rm.deleteStrayLocked(ctx, slog, st, stray); code != ErrNone {
				ignore(st, code, "stray log of another topic ID not deleted", -1)
				continue
			}
			p, created = rm.getOrCreateHostedPartition(t)
			if p == nil {
				ignore(st, ErrStorageError, "offline log dir", -1)
				continue
			}
		}
		if reason := rm.unprovenLog(p, st); reason != "" {
			// A log without a topic ID that the state cannot have been
			// written for (a standalone broker's, or a restored dir's):
			// taking it would serve its records as the new topic's and
			// break the epoch order the followers truncate by. It is kept
			// but never served, and the partition starts empty.
			if code := rm.setAsideLocked(ctx, slog, st, reason); code != ErrNone {
				ignore(st, code, "log of no topic ID not set aside", -1)
				continue
			}
			p, created = rm.getOrCreateHostedPartition(t)
			if p == nil {
				ignore(st, ErrStorageError, "offline log dir", -1)
				continue
			}
		}
		oldLeader, current, currentPartitionEpoch := p.leaderAndEpochs()
		if logEpoch := rm.untakenLogEpoch(p, t); st.LeaderEpoch < logEpoch {
			// The partition has not taken its log yet (the first state
			// after a restart) and the log has records of a later leader
			// epoch than this state's: the state is older than the log,
			// and taking it would put an older epoch after a newer one in
			// the log's epoch cache. Refused like any stale leader epoch.
			stateFields(slog.Warn(), st).Int32("log_latest_leader_epoch", logEpoch).
				Msg("Ignoring LeaderAndIsr request: its leader epoch is smaller than the latest leader epoch of the local log")
			ignore(st, ErrStaleControllerEpoch, "leader epoch below the log's latest", logEpoch)
			rm.forgetIfCreated(t, p, created)
			continue
		}
		switch {
		case st.LeaderEpoch > current || isRefresh(st, oldLeader, current, currentPartitionEpoch):
			if !slices.Contains(st.Replicas, rm.cfg.BrokerID) {
				stateFields(slog.Warn(), st).Ints32("replicas", st.Replicas).
					Msg("Ignoring LeaderAndIsr request: this broker is not in the assigned replica list")
				ignore(st, ErrUnknownTopicOrPartition, "not an assigned replica", current)
				rm.forgetIfCreated(t, p, created)
				continue
			}
			tr := partitionTransition{partition: p, state: st, oldLeader: oldLeader, oldLeaderEpoch: current, created: created}
			if st.Leader == rm.cfg.BrokerID {
				toLeader = append(toLeader, tr)
			} else {
				toFollower = append(toFollower, tr)
			}
		default:
			// An older epoch, or the same one again: the seed answers
			// STALE_CONTROLLER_EPOCH for both and changes nothing, and warns
			// only about an older one.
			if st.LeaderEpoch == current {
				stateFields(slog.Debug(), st).Int32("current_leader_epoch", current).
					Msg("Ignoring LeaderAndIsr request: its leader epoch matches the current leader epoch")
				ignore(st, ErrStaleControllerEpoch, "same leader epoch", current)
			} else {
				stateFields(slog.Warn(), st).Int32("current_leader_epoch", current).
					Msg("Ignoring LeaderAndIsr request: its leader epoch is smaller than the current leader epoch")
				ignore(st, ErrStaleControllerEpoch, "stale leader epoch", current)
			}
			rm.forgetIfCreated(t, p, created)
		}
	}
	ignored.Done()

	// Phase 2. Logs created here are not fsynced one by one: one sync per log
	// dir below makes them durable before the controller hears back.
	var becameLeader, becameFollower []tp.TopicPartition
	if len(toLeader) > 0 {
		becameLeader = rm.makeLeaders(ctx, slog, req, toLeader, responses)
	}
	if len(toFollower) > 0 {
		becameFollower = rm.makeFollowers(ctx, slog, req, toFollower, responses)
	}
	if len(toLeader)+len(toFollower) > 0 {
		if err := rm.logs.SyncDirs(); err != nil {
			rm.logger.Error().Err(err).Msg("sync log dirs after LeaderAndIsr")
		}
	}
	// A partition whose log could not be created is offline; one skipped
	// for the shutdown is left as it was (un-hosted, if this request hosted
	// it).
	skipped := 0
	for _, tr := range slices.Concat(toLeader, toFollower) {
		if responses[tr.state.TopicPartition] == ErrBrokerNotAvailable {
			skipped++
			rm.forgetIfCreated(tr.state.TopicPartition, tr.partition, tr.created)
			continue
		}
		if tr.partition.Log() == nil {
			rm.markPartitionOffline(ctx, tr.state.TopicPartition, offlineNoLog, nil)
			responses[tr.state.TopicPartition] = ErrStorageError
		}
	}

	if skipped > 0 {
		slog.Warn().Int("partitions", skipped).
			Msg("Skipped the state change of partitions without a log: the broker is shutting down; the controller sends them again at its next registration")
	}

	// Phase 3. The HW checkpoint loop starts only now, so it never writes a
	// file before the partitions are populated (the seed's comment).
	rm.startHighWatermarkCheckpointLoop()
	// Replicas being moved between log dirs get their alter-log-dirs
	// fetchers (the seed's future-replica step), from the future log's end.
	var updated []*Partition
	for _, tr := range slices.Concat(toLeader, toFollower) {
		if responses[tr.state.TopicPartition] == ErrNone {
			updated = append(updated, tr.partition)
		}
	}
	rm.addFutureReplicaFetchersLocked(ctx, updated)
	rm.cfg.Fetchers.ShutdownIdleFetchers()
	rm.cfg.AlterLogDirsFetchers.ShutdownIdleFetchers()
	if rm.cfg.OnLeadershipChange != nil {
		rm.cfg.OnLeadershipChange(becameLeader, becameFollower)
	}
	resp := LeaderAndIsrResponse{Error: ErrNone, PartitionErrors: make([]PartitionError, 0, len(req.PartitionStates))}
	failed := 0
	for _, st := range req.PartitionStates {
		code := responses[st.TopicPartition]
		if code != ErrNone {
			failed++
		}
		resp.PartitionErrors = append(resp.PartitionErrors, PartitionError{TopicPartition: st.TopicPartition, Error: code})
	}
	span.SetAttributes(attribute.Int("replicad.became_leader", len(becameLeader)),
		attribute.Int("replicad.became_follower", len(becameFollower)), attribute.Int("replicad.partition_errors", failed),
		attribute.String("replicad.error_code", ErrNone.String()))
	slog.Info().Int("partitions", len(req.PartitionStates)).Int("became_leader", len(becameLeader)).
		Int("became_follower", len(becameFollower)).Int("partition_errors", failed).Msg("Completed LeaderAndIsr request")
	return resp
}

// strayTopicID is the topic ID of the replica of st's partition here when it
// is another topic's than st's (the hosted partition's, or else its log's),
// "" when it is the same, or either is unknown.
func (rm *ReplicaManager) strayTopicID(p *Partition, st PartitionState) string {
	if id := rm.replicaTopicID(p, st.TopicPartition); topicIDsConflict(id, st.TopicID) {
		return id
	}
	return ""
}

// deleteStrayLocked stops and deletes the replica of st's partition that is
// of the topic ID stray, not st's (KRaft's stray partitions): its fetchers
// are removed, it is no longer hosted, and its log is deleted. Runs under
// stateChangeMu.
func (rm *ReplicaManager) deleteStrayLocked(ctx context.Context, slog zerolog.Logger, st PartitionState, stray string) ErrorCode {
	t := st.TopicPartition
	_, span := rm.tracer.Start(ctx, "ReplicaManager.deleteStrayLog", trace.WithAttributes(append(partitionAttrs(t),
		attribute.String("replicad.stray_topic_id", stray), attribute.String("replicad.topic_id", st.TopicID))...))
	defer span.End()
	stateFields(slog.Warn(), st).Str("stray_topic_id", stray).Str("topic_id", st.TopicID).
		Msg("Deleting a stray replica: its topic ID is not the controller's (a topic of this name was deleted and created again)")
	rm.cfg.Fetchers.RemoveFetcherForPartitions([]tp.TopicPartition{t})
	rm.cfg.AlterLogDirsFetchers.RemoveFetcherForPartitions([]tp.TopicPartition{t})
	code := rm.stopPartition(slog, StopReplicaPartition{TopicPartition: t, LeaderEpoch: NoEpoch, Delete: true})
	setErrorCode(span, code)
	return code
}

// unprovenLog says why the log of st's partition here cannot be taken as
// the log of st's topic, "" when it can (or there is none). Only a log
// without a topic ID, given one by st, is in question: a log with an ID is
// proven (or stray, see strayTopicID), and a state without an ID (a
// standalone broker's) proves nothing either way. Such a log is taken only
// as a log from before topic IDs would be: its partition already existed
// (st is not for a new replica) and its epochs are not ahead of st's
// leader epoch (leader epochs only grow within a topic; a topic created
// since restarts them at 0). An empty log holds nothing to mistake.
func (rm *ReplicaManager) unprovenLog(p *Partition, st PartitionState) string {
	if st.TopicID == "" || rm.replicaTopicID(p, st.TopicPartition) != "" {
		return ""
	}
	l := p.Log()
	if l == nil {
		var ok bool
		if l, ok = rm.logs.GetLog(st.TopicPartition); !ok {
			return ""
		}
	}
	latest := l.LatestEpoch()
	switch {
	case l.LogEndOffset() == 0 && latest < 0:
		return ""
	case latest > st.LeaderEpoch:
		return fmt.Sprintf("the log's latest leader epoch %d is ahead of the partition's %d", latest, st.LeaderEpoch)
	case st.IsNew:
		return "the replica is new, yet a log of no topic ID is here"
	}
	return ""
}

// untakenLogEpoch is the latest leader epoch of the log of t here when the
// partition has not taken it yet (after a restart), -1 otherwise: once
// taken, the partition's own leader epoch is at least the log's.
func (rm *ReplicaManager) untakenLogEpoch(p *Partition, t tp.TopicPartition) int32 {
	if p.Log() != nil {
		return -1
	}
	l, ok := rm.logs.GetLog(t)
	if !ok {
		return -1
	}
	return l.LatestEpoch()
}

// setAsideLocked stops the replica of st's partition and sets its log
// aside (logmgr.SetAsideLog): renamed "*-stray", kept, never served, and
// counted (MetricsRecorder.LogSetAside). The partition then starts over
// from an empty log. Runs under stateChangeMu.
func (rm *ReplicaManager) setAsideLocked(ctx context.Context, slog zerolog.Logger, st PartitionState, reason string) ErrorCode {
	t := st.TopicPartition
	_, span := rm.tracer.Start(ctx, "ReplicaManager.setAsideLog", trace.WithAttributes(append(partitionAttrs(t),
		attribute.String("replicad.topic_id", st.TopicID), attribute.Int("replicad.leader_epoch", int(st.LeaderEpoch)),
		attribute.Bool("replicad.is_new", st.IsNew), attribute.String("replicad.reason", reason))...))
	defer span.End()
	rm.cfg.Fetchers.RemoveFetcherForPartitions([]tp.TopicPartition{t})
	rm.cfg.AlterLogDirsFetchers.RemoveFetcherForPartitions([]tp.TopicPartition{t})
	if code := rm.stopPartition(slog, StopReplicaPartition{TopicPartition: t, LeaderEpoch: NoEpoch}); code != ErrNone {
		setErrorCode(span, code)
		return code
	}
	var leo int64 = -1
	if l, ok := rm.logs.GetLog(t); ok {
		leo = l.LogEndOffset()
	}
	dir, err := rm.logs.SetAsideLog(t)
	if err != nil {
		span.RecordError(err)
		setErrorCode(span, ErrStorageError)
		stateFields(slog.Error(), st).Err(err).Str("topic_id", st.TopicID).Msg("Could not set aside a log of no topic ID")
		return ErrStorageError
	}
	span.SetAttributes(attribute.String("replicad.set_aside_dir", dir), attribute.Int64("replicad.log_end_offset", leo))
	setErrorCode(span, ErrNone)
	rm.env.metrics.LogSetAside(t)
	stateFields(slog.Warn(), st).Str("topic_id", st.TopicID).Bool("is_new", st.IsNew).Str("reason", reason).
		Int64("log_end_offset", leo).Str("set_aside_dir", dir).
		Msg("Setting aside a log of no topic ID: it cannot be proven to belong to the topic; it is kept, never served, and the partition starts empty")
	return ErrNone
}

// repairDamagedLog cuts the partition's log at its damage, when it opened
// damaged below its recovery point (log.Damaged), before the partition
// follows a live leader: the leader has the records from there, and the
// fetcher brings them back. A partition without a live leader keeps its
// damaged log, and every byte of it, until it has one. The repair is a
// Partition.repairDamagedLog span under ctx's, the transition's, when
// spanned (within MaxPartitionSpans), and logged either way.
func (rm *ReplicaManager) repairDamagedLog(ctx context.Context, spanned bool, slog zerolog.Logger, tr partitionTransition) error {
	// The log manager's: after a restart the partition has not adopted its
	// log before its first transition.
	l, ok := rm.logs.GetLog(tr.state.TopicPartition)
	if !ok {
		return nil
	}
	d, ok := l.Damaged()
	if !ok {
		return nil
	}
	span := trace.SpanFromContext(context.Background()) // records nothing
	if spanned {
		_, span = rm.tracer.Start(ctx, "Partition.repairDamagedLog", trace.WithAttributes(append(transitionAttrs(tr),
			attribute.Int64("replicad.damaged_offset", d.Offset), attribute.Int64("replicad.recovery_point", d.RecoveryPoint),
			attribute.String("replicad.reason", "damaged below the recovery point"))...))
		defer span.End()
		span.RecordError(d.Cause)
	}
	err := l.RepairDamage()
	stateFields(slog.Warn(), tr.state).Int64("damaged_offset", d.Offset).Int64("recovery_point", d.RecoveryPoint).
		Str("damage", d.Cause.Error()).Err(err).
		Msg("Repairing a log damaged below its recovery point before following the leader: it is cut at the damage and fetched again from there")
	if err != nil {
		span.RecordError(err)
		setErrorCode(span, storageErrorCode(err))
	}
	return err
}

// isRefresh reports a LeaderAndIsr that keeps the partition's leader and
// leader epoch but carries a newer partition epoch: the controller's ISR
// for the same leadership (Kafka's makeLeader takes partitionEpoch >=
// current). A leader whose ISR change got an unclear answer keeps it
// pending until new metadata comes (completeIsrChange); this is that
// metadata, without waiting for the next leader epoch. A different leader at
// the same epoch is never a refresh: a controller bumps the epoch whenever
// the leader changes.
func isRefresh(st PartitionState, leader, leaderEpoch, partitionEpoch int32) bool {
	return st.LeaderEpoch == leaderEpoch && st.Leader == leader && st.PartitionEpoch > partitionEpoch
}

type partitionTransition struct {
	partition *Partition
	state     PartitionState
	// oldLeader and oldLeaderEpoch are the partition's before the request.
	oldLeader, oldLeaderEpoch int32
	// created: this request made the partition hosted.
	created bool
}

// errLeaving is a transition not made because the broker is shutting down
// and it would have created a log (see BeginShutdown).
var errLeaving = errors.New("the broker is shutting down: no log is created")

// transitionErrorCode is the code a transition that ended with err
// answers.
func transitionErrorCode(err error) ErrorCode {
	if errors.Is(err, errLeaving) {
		return ErrBrokerNotAvailable
	}
	return storageErrorCode(err)
}

// skipForShutdown reports whether tr's transition is skipped because the
// broker is leaving and the transition would create a log: creating
// thousands of them must not hold the broker's exit. Leadership changes of
// existing logs go on.
func (rm *ReplicaManager) skipForShutdown(tr partitionTransition) bool {
	if !rm.leaving.Load() || tr.partition.Log() != nil {
		return false
	}
	_, ok := rm.logs.GetLog(tr.state.TopicPartition)
	return !ok
}

// wholeRequestError answers a request rejected as a whole: code at the top
// and for every partition.
func wholeRequestError(req LeaderAndIsrRequest, code ErrorCode) LeaderAndIsrResponse {
	resp := LeaderAndIsrResponse{Error: code}
	for _, st := range req.PartitionStates {
		resp.PartitionErrors = append(resp.PartitionErrors, PartitionError{TopicPartition: st.TopicPartition, Error: code})
	}
	return resp
}

// getOrCreateHostedPartition returns the online partition, creating it when
// it is not hosted, or nil when it is hosted offline.
func (rm *ReplicaManager) getOrCreateHostedPartition(t tp.TopicPartition) (p *Partition, created bool) {
	rm.partitionsMu.Lock()
	defer rm.partitionsMu.Unlock()
	h, ok := rm.partitions[t]
	if !ok {
		h = &hostedPartition{partition: newPartition(t, rm.env)}
		rm.partitions[t] = h
	}
	if h.offline.Load() {
		return nil, false
	}
	return h.partition, !ok
}

// forgetIfCreated un-hosts a partition this request created but rejected, so
// a rejected request leaves the broker as it found it.
func (rm *ReplicaManager) forgetIfCreated(t tp.TopicPartition, p *Partition, created bool) {
	if !created {
		return
	}
	rm.partitionsMu.Lock()
	if h, ok := rm.partitions[t]; ok && h.partition == p {
		delete(rm.partitions, t)
	}
	rm.partitionsMu.Unlock()
}

// makeLeaders makes this broker the leader of the given partitions (Kafka's
// ReplicaManager.makeLeaders) and returns those it newly leads. Each
// transition is a Partition.makeLeader child span, or an event above
// MaxPartitionSpans partitions (see trace.go).
func (rm *ReplicaManager) makeLeaders(ctx context.Context, slog zerolog.Logger, req LeaderAndIsrRequest, transitions []partitionTransition, responses map[tp.TopicPartition]ErrorCode) []tp.TopicPartition {
	ctx, span := rm.tracer.Start(ctx, "ReplicaManager.makeLeaders", trace.WithAttributes(attribute.Int("replicad.partitions", len(transitions)),
		attribute.Int("replicad.controller_epoch", int(req.ControllerEpoch))))
	defer span.End()
	parts := make([]tp.TopicPartition, len(transitions))
	for i, tr := range transitions {
		parts[i] = tr.state.TopicPartition
		responses[parts[i]] = ErrNone
		stateFields(slog.Trace(), tr.state).Msg("Handling LeaderAndIsr request: starting the become-leader transition")
	}
	// First stop fetching: a leader must not append what an old leader sends.
	rm.cfg.Fetchers.RemoveFetcherForPartitions(parts)
	// Partitions are independent, and creating their logs is file system
	// metadata work that overlaps well, so large requests fan out.
	// Child spans only while they are few, and only when the parent records
	// (a child of a non-recording span would not record either, and building
	// its attributes would be wasted).
	childSpans := len(transitions) <= MaxPartitionSpans && span.IsRecording()
	isNewLeader := make([]bool, len(transitions))
	errs := make([]error, len(transitions))
	forEachParallel(len(transitions), func(i int) {
		tr := transitions[i]
		if rm.skipForShutdown(tr) {
			errs[i] = errLeaving
			return
		}
		var pspan trace.Span
		if childSpans {
			_, pspan = rm.tracer.Start(ctx, "Partition.makeLeader", trace.WithAttributes(transitionAttrs(tr)...))
		}
		isNewLeader[i], errs[i] = tr.partition.makeLeader(tr.state, false /* syncMetadata: SyncDirs after the batch */)
		if pspan != nil {
			endTransitionSpan(pspan, tr.partition, errs[i], attribute.Bool("replicad.is_new_leader", isNewLeader[i]))
		}
	})
	var events *spanevents.Budget
	if !childSpans {
		events = newPartitionEvents(span)
	}
	var became []tp.TopicPartition
	for i, tr := range transitions {
		t := tr.state.TopicPartition
		switch {
		case errors.Is(errs[i], errLeaving):
			responses[t] = transitionErrorCode(errs[i])
		case errs[i] != nil:
			stateChangeFailed(slog, tr.state, "become-leader", errs[i])
			responses[t] = storageErrorCode(errs[i])
		case isNewLeader[i]:
			became = append(became, t)
			stateFields(slog.Trace(), tr.state).Msg("Stopped fetchers as part of become-leader request")
		default:
			stateFields(slog.Info(), tr.state).
				Msg("Skipped the become-leader state change after marking its partition as leader: already the leader")
		}
		if events.Want() {
			events.Add("Partition.makeLeader", transitionEventAttrs(tr, errs[i], attribute.Bool("replicad.is_new_leader", isNewLeader[i]))...)
		}
	}
	events.Done()
	for i, tr := range transitions {
		if errs[i] == nil {
			stateFields(slog.Trace(), tr.state).Msg("Completed LeaderAndIsr request for the become-leader transition")
		}
	}
	span.SetAttributes(attribute.Int("replicad.became_leader", len(became)))
	return became
}

// makeFollowers makes this broker a follower of the given partitions (Kafka's
// ReplicaManager.makeFollowers) and returns those whose leader or leader epoch
// changed; only they get their fetchers restarted. One that keeps its leader
// and epoch but that no fetcher holds (set aside as failed, or never
// started) gets its fetcher added back (Kafka's KRaft brokers do too), and
// is not returned: its role did not change. A partition whose leader is
// NoLeader (-1) becomes a follower of nobody: its state is taken and its
// fetcher removed, and none is added. Each transition is a
// Partition.makeFollower child span, or an event above MaxPartitionSpans
// partitions.
func (rm *ReplicaManager) makeFollowers(ctx context.Context, slog zerolog.Logger, req LeaderAndIsrRequest, transitions []partitionTransition, responses map[tp.TopicPartition]ErrorCode) []tp.TopicPartition {
	ctx, span := rm.tracer.Start(ctx, "ReplicaManager.makeFollowers", trace.WithAttributes(attribute.Int("replicad.partitions", len(transitions)),
		attribute.Int("replicad.controller_epoch", int(req.ControllerEpoch))))
	defer span.End()
	for _, tr := range transitions {
		responses[tr.state.TopicPartition] = ErrNone
		stateFields(slog.Trace(), tr.state).Msg("Handling LeaderAndIsr request: starting the become-follower transition")
	}
	childSpans := len(transitions) <= MaxPartitionSpans && span.IsRecording() // as in makeLeaders
	didChange := make([]bool, len(transitions))
	errs := make([]error, len(transitions))
	outcome := make([]string, len(transitions))
	forEachParallel(len(transitions), func(i int) {
		tr := transitions[i]
		if rm.skipForShutdown(tr) {
			errs[i] = errLeaving
			return
		}
		var pspan trace.Span
		pctx := ctx // the transition's span's, when it has one
		if childSpans {
			pctx, pspan = rm.tracer.Start(ctx, "Partition.makeFollower", trace.WithAttributes(transitionAttrs(tr)...))
		}
		_, alive := rm.metadata.aliveBroker(tr.state.Leader)
		switch {
		case alive:
			if errs[i] = rm.repairDamagedLog(pctx, childSpans, slog, tr); errs[i] != nil {
				break
			}
			didChange[i], errs[i] = tr.partition.makeFollower(tr.state, false /* syncMetadata */)
			if errs[i] == nil && !didChange[i] && !rm.cfg.Fetchers.IsFetching(tr.state.TopicPartition) {
				// Same leader and leader epoch, yet no fetcher holds the
				// partition: its fetcher set it aside as failed ("until the
				// next LeaderAndIsr"), or it was never started. This is that
				// LeaderAndIsr: the fetcher is added back, as Kafka's KRaft
				// brokers do, or the follower waits for a new leader epoch
				// that may never come (after a topic is deleted and created
				// again, the new topic's first state is all it gets).
				outcome[i] = outcomeFetcherReadded
			}
		case tr.state.Leader == noLeader:
			// The controller left the partition without a leader (no ISR
			// member alive). Unlike an unknown leader, this is a decision:
			// take its epoch and assignment and stop fetching (from the old
			// leader) until a LeaderAndIsr names a new one, as Kafka's KRaft
			// brokers do for a follower without a leader endpoint.
			stateFields(slog.Info(), tr.state).Msg("Becoming a follower without a leader: no fetcher until a leader is elected")
			didChange[i], errs[i] = tr.partition.makeFollower(tr.state, false /* syncMetadata */)
			outcome[i] = "no leader"
		default:
			// Create the log even though the leader is unavailable, so the
			// partition's HW stays in the checkpoint file (KAFKA-1647).
			stateFields(slog.Error(), tr.state).
				Msg("Received LeaderAndIsr request but cannot become follower since the new leader is unavailable")
			errs[i] = tr.partition.createLogOnly(tr.state, false)
			outcome[i] = "leader unavailable"
		}
		if pspan != nil {
			endTransitionSpan(pspan, tr.partition, errs[i], followerAttrs(didChange[i], outcome[i])...)
		}
	})
	var events *spanevents.Budget
	if !childSpans {
		events = newPartitionEvents(span)
	}
	// changed have a new leader or leader epoch; readd keep theirs but have
	// lost their fetcher. Both get one below; only changed are returned (and
	// have their old fetcher removed first).
	var changed, readd []partitionTransition
	for i, tr := range transitions {
		switch {
		case errors.Is(errs[i], errLeaving):
			responses[tr.state.TopicPartition] = transitionErrorCode(errs[i])
		case errs[i] != nil:
			stateChangeFailed(slog, tr.state, "become-follower", errs[i])
			responses[tr.state.TopicPartition] = storageErrorCode(errs[i])
		case didChange[i]:
			changed = append(changed, tr)
		case outcome[i] == outcomeFetcherReadded:
			readd = append(readd, tr)
			stateFields(slog.Info(), tr.state).Int32("old_leader", tr.oldLeader).Str("topic_id", tr.state.TopicID).
				Msg("Adding the fetcher back as part of become-follower request: the leader and leader epoch are the same, but no fetcher holds the partition (set aside as failed, or never started)")
		case outcome[i] == "":
			stateFields(slog.Info(), tr.state).Int32("old_leader", tr.oldLeader).
				Msg("Skipped the become-follower state change: the new leader is the same as the old leader")
		}
		if events.Want() {
			events.Add("Partition.makeFollower", transitionEventAttrs(tr, errs[i], followerAttrs(didChange[i], outcome[i])...)...)
		}
	}
	events.Done()

	parts := make([]tp.TopicPartition, len(changed))
	for i, tr := range changed {
		parts[i] = tr.state.TopicPartition
	}
	rm.cfg.Fetchers.RemoveFetcherForPartitions(parts)
	// makeFollower woke the waiters of each changed partition; they now see a
	// follower and complete with NOT_LEADER_OR_FOLLOWER.
	for _, tr := range changed {
		stateFields(slog.Trace(), tr.state).Msg("Stopped fetchers as part of become-follower request")
	}
	// Truncation is by leader epoch (KIP-101, KIP-279), which the fetcher
	// does against the new leader (Log.truncate spans): nothing is
	// truncated here, unlike the seed's older makeFollowers.
	for _, tr := range changed {
		stateFields(slog.Trace(), tr.state).
			Msg("Truncated logs and checkpointed recovery boundaries as part of become-follower request: deferred to the fetcher")
	}

	if rm.shuttingDown.Load() || rm.leaving.Load() {
		// Leaving (BeginShutdown): the controller took this broker out of
		// these partitions' ISRs, so what it would fetch serves nobody and
		// loads the leaders taking over its leaderships. Those it kept
		// following stop too.
		var kept []tp.TopicPartition
		for i, tr := range transitions {
			if errs[i] == nil && !didChange[i] {
				kept = append(kept, tr.state.TopicPartition)
			}
		}
		rm.cfg.Fetchers.RemoveFetcherForPartitions(kept)
		for _, tr := range slices.Concat(changed, readd) {
			stateFields(slog.Trace(), tr.state).Msg("Skipped the adding-fetcher step of the become-follower state change since the broker is shutting down")
		}
		span.SetAttributes(attribute.Int("replicad.became_follower", len(parts)), attribute.Bool("replicad.shutting_down", true))
		return parts
	}
	starting := slices.Concat(changed, readd)
	initial := make(map[tp.TopicPartition]InitialFetchState, len(starting))
	var leaders []int
	for _, tr := range starting {
		p := tr.partition
		p.mu.RLock()
		leader, epoch, l := p.leader, p.leaderEpoch, p.log
		p.mu.RUnlock()
		if leader == noLeader || l == nil {
			// Nobody to fetch from: the fetcher was removed above.
			continue
		}
		b, ok := rm.metadata.aliveBroker(leader)
		if !ok {
			continue
		}
		// Start from the log end offset: truncation by leader epoch (KIP-101,
		// KIP-279) decides what to keep, not the HW.
		initial[p.topicPartition] = InitialFetchState{Leader: b, LeaderEpoch: epoch, InitOffset: l.LogEndOffset(), TopicID: p.TopicID()}
		if !slices.Contains(leaders, int(leader)) {
			leaders = append(leaders, int(leader))
		}
	}
	if len(initial) > 0 {
		attrs := []attribute.KeyValue{attribute.Int("replicad.partitions", len(initial)), attribute.IntSlice("replicad.leaders", leaders),
			attribute.Int("replicad.controller_epoch", int(req.ControllerEpoch))}
		if len(initial) == 1 {
			for t, init := range initial {
				attrs = append(attrs, partitionAttrs(t)...)
				attrs = append(attrs, attribute.Int("replicad.leader", int(init.Leader.ID)),
					attribute.Int("replicad.leader_epoch", int(init.LeaderEpoch)), attribute.Int64("replicad.fetch_offset", init.InitOffset))
			}
		}
		// The fetcher manager keeps this span's context with each partition's
		// fetch state: its restarts and truncations link back to it.
		fctx, fspan := rm.tracer.Start(ctx, "FetcherManager.addFetcherForPartitions", trace.WithAttributes(attrs...))
		rm.cfg.Fetchers.AddFetcherForPartitions(fctx, initial)
		fspan.End()
		for _, tr := range changed {
			if init, ok := initial[tr.state.TopicPartition]; ok {
				stateFields(slog.Trace(), tr.state).Int64("fetch_offset", init.InitOffset).Str("leader_addr", init.Leader.Addr()).
					Msg("Started fetcher to new leader as part of become-follower request")
			}
		}
		for _, tr := range readd {
			if init, ok := initial[tr.state.TopicPartition]; ok {
				stateFields(slog.Info(), tr.state).Int64("fetch_offset", init.InitOffset).Str("leader_addr", init.Leader.Addr()).
					Str("topic_id", init.TopicID).Msg("Added the fetcher back to the same leader as part of become-follower request")
			}
		}
	}
	for _, tr := range changed {
		stateFields(slog.Trace(), tr.state).Msg("Completed LeaderAndIsr request for the become-follower transition")
	}
	span.SetAttributes(attribute.Int("replicad.became_follower", len(parts)), attribute.Int("replicad.fetchers_readded", len(readd)))
	return parts
}

// outcomeFetcherReadded is the outcome of a become-follower transition that
// kept its leader and leader epoch but found no fetcher for the partition:
// the fetcher is added back.
const outcomeFetcherReadded = "fetcher added back"

// followerAttrs are the outcome of a become-follower transition.
func followerAttrs(changed bool, outcome string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.Bool("replicad.changed", changed)}
	if outcome != "" {
		attrs = append(attrs, attribute.String("replicad.outcome", outcome))
	}
	return attrs
}

// endTransitionSpan ends a Partition.makeLeader / makeFollower span with its
// outcome: the error code, and on success extra and the HW and LEO.
func endTransitionSpan(span trace.Span, p *Partition, err error, extra ...attribute.KeyValue) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(extra...)
	if err != nil {
		setErrorCode(span, storageErrorCode(err))
		span.RecordError(err)
		return
	}
	span.SetAttributes(offsetAttrs(p)...)
	span.SetAttributes(attribute.String("replicad.error_code", ErrNone.String()))
}

// transitionEventAttrs are the attributes of a transition's event (above
// MaxPartitionSpans): the request's state, the outcome, the HW and LEO.
func transitionEventAttrs(tr partitionTransition, err error, extra ...attribute.KeyValue) []attribute.KeyValue {
	attrs := append(transitionAttrs(tr), extra...)
	attrs = append(attrs, attribute.String("replicad.error_code", transitionErrorCode(err).String()))
	if err == nil {
		attrs = append(attrs, offsetAttrs(tr.partition)...)
	}
	return attrs
}

// setErrorCode records a non-NONE error code on span and marks it failed.
func setErrorCode(span trace.Span, code ErrorCode) {
	span.SetAttributes(attribute.String("replicad.error_code", code.String()))
	if code != ErrNone {
		span.SetStatus(codes.Error, code.String())
	}
}

// stateChangeFailed logs a transition that failed on storage. The failure
// itself was reported by whoever met it (the log or the log manager), and
// takes the log dir offline from there.
func stateChangeFailed(slog zerolog.Logger, st PartitionState, transition string, err error) {
	msg := "Skipped the state change: the local replica could not take it"
	switch {
	case errors.Is(err, log.ErrDamaged):
		msg = "Refused the state change: the local log is damaged below its recovery point; another replica must lead, and this one is repaired when it follows"
	case errors.Is(err, log.ErrStorage), errors.Is(err, logmgr.ErrDirOffline), errors.Is(err, logmgr.ErrNoOnlineDir):
		msg = "Skipped the state change since the replica for the partition is offline due to disk error"
	}
	stateFields(slog.Error(), st).Err(err).Str("transition", transition).Msg(msg)
}

// forEachParallel runs fn(0..n-1), fanning out over a few goroutines when n is
// large enough for it to pay.
func forEachParallel(n int, fn func(i int)) {
	const minPerWorker, maxWorkers = 64, 8
	workers := min(maxWorkers, n/minPerWorker)
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}
