package core

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
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
		attribute.Int("replicad.partitions", len(req.PartitionStates)),
	))
	defer span.End()
	for _, st := range req.PartitionStates {
		rm.stateLog.Trace().Str("topic", st.TopicPartition.Topic).Int32("partition", st.TopicPartition.Partition).
			Int32("leader", st.Leader).Int32("leader_epoch", st.LeaderEpoch).Int32("controller_id", req.ControllerID).
			Int32("controller_epoch", req.ControllerEpoch).Msg("received LeaderAndIsr")
	}

	rm.stateChangeMu.Lock()
	defer rm.stateChangeMu.Unlock()

	// Phase 1.
	if rm.isBrokerEpochStale("LeaderAndIsr", req.ControllerID, req.BrokerEpoch) {
		span.SetAttributes(attribute.String("replicad.error_code", ErrStaleBrokerEpoch.String()))
		return wholeRequestError(req, ErrStaleBrokerEpoch)
	}
	if !rm.acceptControllerEpochLocked("LeaderAndIsr", req.ControllerID, req.ControllerEpoch) {
		span.SetAttributes(attribute.String("replicad.error_code", ErrStaleControllerEpoch.String()))
		return wholeRequestError(req, ErrStaleControllerEpoch)
	}
	rm.metadata.addLive(req.LiveLeaders)

	responses := make(map[tp.TopicPartition]ErrorCode, len(req.PartitionStates))
	var toLeader, toFollower []partitionTransition
	for _, st := range req.PartitionStates {
		t := st.TopicPartition
		p, created := rm.getOrCreateHostedPartition(t)
		if p == nil {
			rm.stateLog.Warn().Str("topic", t.Topic).Int32("partition", t.Partition).Int32("controller_epoch", req.ControllerEpoch).
				Msg("ignoring LeaderAndIsr: the local replica is in an offline log dir")
			responses[t] = ErrStorageError
			continue
		}
		current := p.LeaderEpoch()
		switch {
		case st.LeaderEpoch > current:
			if !slices.Contains(st.Replicas, rm.cfg.BrokerID) {
				rm.stateLog.Warn().Str("topic", t.Topic).Int32("partition", t.Partition).Ints32("replicas", st.Replicas).
					Msg("ignoring LeaderAndIsr: this broker is not in the assigned replicas")
				responses[t] = ErrUnknownTopicOrPartition
				rm.forgetIfCreated(t, p, created)
				continue
			}
			tr := partitionTransition{partition: p, state: st}
			if st.Leader == rm.cfg.BrokerID {
				toLeader = append(toLeader, tr)
			} else {
				toFollower = append(toFollower, tr)
			}
		default:
			// An older epoch, or the same one again: the seed answers
			// STALE_CONTROLLER_EPOCH for both and changes nothing.
			ev := rm.stateLog.Warn()
			if st.LeaderEpoch == current {
				ev = rm.stateLog.Debug()
			}
			ev.Str("topic", t.Topic).Int32("partition", t.Partition).Int32("leader_epoch", st.LeaderEpoch).
				Int32("current_leader_epoch", current).Msg("ignoring LeaderAndIsr: leader epoch is not newer")
			responses[t] = ErrStaleControllerEpoch
			rm.forgetIfCreated(t, p, created)
		}
	}

	// Phase 2. Logs created here are not fsynced one by one: one sync per log
	// dir below makes them durable before the controller hears back.
	var becameLeader, becameFollower []tp.TopicPartition
	if len(toLeader) > 0 {
		becameLeader = rm.makeLeaders(ctx, req, toLeader, responses)
	}
	if len(toFollower) > 0 {
		becameFollower = rm.makeFollowers(ctx, req, toFollower, responses)
	}
	if len(toLeader)+len(toFollower) > 0 {
		if err := rm.logs.SyncDirs(); err != nil {
			rm.logger.Error().Err(err).Msg("sync log dirs after LeaderAndIsr")
		}
	}
	// A partition whose log could not be created is offline.
	for _, tr := range slices.Concat(toLeader, toFollower) {
		if tr.partition.Log() == nil {
			rm.markPartitionOffline(tr.state.TopicPartition)
			responses[tr.state.TopicPartition] = ErrStorageError
		}
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
		attribute.Int("replicad.became_follower", len(becameFollower)), attribute.Int("replicad.partition_errors", failed))
	return resp
}

type partitionTransition struct {
	partition *Partition
	state     PartitionState
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
// ReplicaManager.makeLeaders) and returns those it newly leads.
func (rm *ReplicaManager) makeLeaders(ctx context.Context, req LeaderAndIsrRequest, transitions []partitionTransition, responses map[tp.TopicPartition]ErrorCode) []tp.TopicPartition {
	ctx, span := rm.tracer.Start(ctx, "ReplicaManager.makeLeaders", trace.WithAttributes(attribute.Int("replicad.partitions", len(transitions))))
	defer span.End()
	parts := make([]tp.TopicPartition, len(transitions))
	for i, tr := range transitions {
		parts[i] = tr.state.TopicPartition
		responses[parts[i]] = ErrNone
	}
	// First stop fetching: a leader must not append what an old leader sends.
	rm.cfg.Fetchers.RemoveFetcherForPartitions(parts)
	// Partitions are independent, and creating their logs is file system
	// metadata work that overlaps well, so large requests fan out.
	isNewLeader := make([]bool, len(transitions))
	errs := make([]error, len(transitions))
	forEachParallel(len(transitions), func(i int) {
		tr := transitions[i]
		_, pspan := rm.tracer.Start(ctx, "Partition.makeLeader", trace.WithAttributes(transitionAttrs(tr.partition, tr.state)...))
		defer pspan.End()
		isNewLeader[i], errs[i] = tr.partition.makeLeader(tr.state, false /* syncMetadata: SyncDirs after the batch */)
		if errs[i] != nil {
			pspan.SetAttributes(attribute.String("replicad.error_code", storageErrorCode(errs[i]).String()))
		} else {
			pspan.SetAttributes(attribute.Bool("replicad.is_new_leader", isNewLeader[i]))
		}
	})
	var became []tp.TopicPartition
	for i, tr := range transitions {
		t := tr.state.TopicPartition
		switch {
		case errs[i] != nil:
			rm.stateChangeFailed(t, "become-leader", req, errs[i])
			responses[t] = storageErrorCode(errs[i])
		case isNewLeader[i]:
			became = append(became, t)
			rm.stateLog.Trace().Str("topic", t.Topic).Int32("partition", t.Partition).Int32("leader_epoch", tr.state.LeaderEpoch).
				Msg("completed become-leader transition")
		default:
			rm.stateLog.Info().Str("topic", t.Topic).Int32("partition", t.Partition).Int32("leader_epoch", tr.state.LeaderEpoch).
				Msg("skipped the become-leader state change: already the leader")
		}
	}
	return became
}

// makeFollowers makes this broker a follower of the given partitions (Kafka's
// ReplicaManager.makeFollowers) and returns those whose leader or leader epoch
// changed; only they get their fetchers restarted. A partition whose leader is
// NoLeader (-1) becomes a follower of nobody: its state is taken and its
// fetcher removed, and none is added.
func (rm *ReplicaManager) makeFollowers(ctx context.Context, req LeaderAndIsrRequest, transitions []partitionTransition, responses map[tp.TopicPartition]ErrorCode) []tp.TopicPartition {
	ctx, span := rm.tracer.Start(ctx, "ReplicaManager.makeFollowers", trace.WithAttributes(attribute.Int("replicad.partitions", len(transitions))))
	defer span.End()
	for _, tr := range transitions {
		responses[tr.state.TopicPartition] = ErrNone
	}
	didChange := make([]bool, len(transitions))
	errs := make([]error, len(transitions))
	forEachParallel(len(transitions), func(i int) {
		tr := transitions[i]
		t := tr.state.TopicPartition
		_, pspan := rm.tracer.Start(ctx, "Partition.makeFollower", trace.WithAttributes(transitionAttrs(tr.partition, tr.state)...))
		defer pspan.End()
		_, alive := rm.metadata.aliveBroker(tr.state.Leader)
		switch {
		case alive:
			didChange[i], errs[i] = tr.partition.makeFollower(tr.state, false /* syncMetadata */)
			pspan.SetAttributes(attribute.Bool("replicad.changed", didChange[i]))
		case tr.state.Leader == noLeader:
			// The controller left the partition without a leader (no ISR
			// member alive). Unlike an unknown leader, this is a decision:
			// take its epoch and assignment and stop fetching (from the old
			// leader) until a LeaderAndIsr names a new one, as Kafka's KRaft
			// brokers do for a follower without a leader endpoint.
			rm.stateLog.Info().Str("topic", t.Topic).Int32("partition", t.Partition).Int32("leader_epoch", tr.state.LeaderEpoch).
				Msg("becoming a follower without a leader: no fetcher until a leader is elected")
			didChange[i], errs[i] = tr.partition.makeFollower(tr.state, false /* syncMetadata */)
			pspan.SetAttributes(attribute.Bool("replicad.changed", didChange[i]), attribute.Bool("replicad.no_leader", true))
		default:
			// Create the log even though the leader is unavailable, so the
			// partition's HW stays in the checkpoint file (KAFKA-1647).
			rm.stateLog.Error().Str("topic", t.Topic).Int32("partition", t.Partition).Int32("leader", tr.state.Leader).
				Msg("cannot become follower: the new leader is not among the live brokers")
			errs[i] = tr.partition.createLogOnly(tr.state.IsNew, false)
			pspan.SetAttributes(attribute.Bool("replicad.leader_unavailable", true))
		}
		if errs[i] != nil {
			pspan.SetAttributes(attribute.String("replicad.error_code", storageErrorCode(errs[i]).String()))
		}
	})
	var changed []*Partition
	for i, tr := range transitions {
		t := tr.state.TopicPartition
		switch {
		case errs[i] != nil:
			rm.stateChangeFailed(t, "become-follower", req, errs[i])
			responses[t] = storageErrorCode(errs[i])
		case didChange[i]:
			changed = append(changed, tr.partition)
		default:
			rm.stateLog.Info().Str("topic", t.Topic).Int32("partition", t.Partition).Int32("leader", tr.state.Leader).
				Msg("skipped the become-follower state change: the leader and epoch are unchanged")
		}
	}

	parts := make([]tp.TopicPartition, len(changed))
	for i, p := range changed {
		parts[i] = p.topicPartition
	}
	rm.cfg.Fetchers.RemoveFetcherForPartitions(parts)
	// makeFollower woke the waiters of each changed partition; they now see a
	// follower and complete with NOT_LEADER_OR_FOLLOWER.

	if rm.shuttingDown.Load() {
		for _, t := range parts {
			rm.stateLog.Trace().Str("topic", t.Topic).Int32("partition", t.Partition).
				Msg("skipped adding a fetcher: the broker is shutting down")
		}
		return parts
	}
	initial := make(map[tp.TopicPartition]InitialFetchState, len(changed))
	for _, p := range changed {
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
		initial[p.topicPartition] = InitialFetchState{Leader: b, LeaderEpoch: epoch, InitOffset: l.LogEndOffset()}
	}
	if len(initial) > 0 {
		_, fspan := rm.tracer.Start(ctx, "FetcherManager.addFetcherForPartitions", trace.WithAttributes(attribute.Int("replicad.partitions", len(initial))))
		rm.cfg.Fetchers.AddFetcherForPartitions(ctx, initial)
		fspan.End()
	}
	return parts
}

// stateChangeFailed logs a failed transition and reports a storage failure so
// the log dir is taken offline.
func (rm *ReplicaManager) stateChangeFailed(t tp.TopicPartition, transition string, req LeaderAndIsrRequest, err error) {
	rm.stateLog.Error().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Str("transition", transition).
		Int32("controller_id", req.ControllerID).Int32("controller_epoch", req.ControllerEpoch).
		Msg("skipped the state change: the replica is offline due to a disk error")
	if errors.Is(err, log.ErrStorage) {
		if dir, ok := rm.logs.DirOf(t); ok {
			rm.reportDirFailure(dir, err)
		}
	}
}

func partitionAttrs(t tp.TopicPartition) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("replicad.topic", t.Topic), attribute.Int("replicad.partition", int(t.Partition))}
}

func transitionAttrs(p *Partition, st PartitionState) []attribute.KeyValue {
	return append(partitionAttrs(st.TopicPartition),
		attribute.Int("replicad.leader", int(st.Leader)),
		attribute.Int("replicad.leader_epoch", int(st.LeaderEpoch)),
		attribute.Int("replicad.old_leader_epoch", int(p.LeaderEpoch())),
		attribute.Int("replicad.controller_epoch", int(st.ControllerEpoch)),
		attribute.Int("replicad.partition_epoch", int(st.PartitionEpoch)),
	)
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
