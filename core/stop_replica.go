package core

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/tp"
)

// StopReplicas handles a StopReplica request (Kafka's
// ReplicaManager.stopReplicas): a request for an earlier incarnation of this
// broker (stale broker epoch) and a stale controller are fenced; a partition
// whose leader epoch is newer than the request's answers
// FENCED_LEADER_EPOCH; the others have their fetchers removed first, then are
// no longer hosted, then (with Delete) lose their log.
func (rm *ReplicaManager) StopReplicas(ctx context.Context, req StopReplicaRequest) StopReplicaResponse {
	ctx, span := rm.tracer.Start(ctx, "ReplicaManager.stopReplicas", trace.WithAttributes(
		attribute.Int("replicad.controller_id", int(req.ControllerID)),
		attribute.Int("replicad.controller_epoch", int(req.ControllerEpoch)),
		attribute.Int64("replicad.broker_epoch", req.BrokerEpoch),
		attribute.Int("replicad.partitions", len(req.Partitions)),
	))
	defer span.End()
	slog := rm.requestStateLog(ctx, req.ControllerID, req.ControllerEpoch)
	slog.Info().Int("partitions", len(req.Partitions)).Int64("broker_epoch", req.BrokerEpoch).Msg("Handling StopReplica request")
	rm.stateChangeMu.Lock()
	defer rm.stateChangeMu.Unlock()

	resp := StopReplicaResponse{Error: ErrNone}
	fenced := func(code ErrorCode) StopReplicaResponse {
		resp.Error = code
		for _, sp := range req.Partitions {
			resp.PartitionErrors = append(resp.PartitionErrors, PartitionError{TopicPartition: sp.TopicPartition, Error: code})
		}
		setErrorCode(span, code)
		return resp
	}
	if rm.isBrokerEpochStale("StopReplica", req.ControllerID, req.BrokerEpoch) {
		return fenced(ErrStaleBrokerEpoch)
	}
	if !rm.acceptControllerEpochLocked("StopReplica", req.ControllerID, req.ControllerEpoch) {
		return fenced(ErrStaleControllerEpoch)
	}

	codes := make([]ErrorCode, len(req.Partitions))
	var toStop []StopReplicaPartition
	for i, sp := range req.Partitions {
		t := sp.TopicPartition
		h := rm.getPartition(t)
		var p *Partition
		if h != nil {
			p = h.partition
		}
		if id := rm.replicaTopicID(p, t); topicIDsConflict(id, sp.TopicID) {
			// The replica here is of another topic of the name (one
			// created after the one being stopped): none of the stopped
			// topic is left, which is what the controller waits to hear.
			slog.Info().Str("topic", t.Topic).Int32("partition", t.Partition).Str("topic_id", sp.TopicID).Str("replica_topic_id", id).
				Msg("Skipping StopReplica: the replica here is of another topic ID")
			continue
		}
		switch {
		case h == nil:
			// Not hosted (Kafka's HostedPartition.None): nothing to stop, but a
			// log left on disk from before a restart is still deleted.
			if sp.Delete {
				toStop = append(toStop, sp)
			}
		case h.offline.Load():
			codes[i] = ErrStorageError
		default:
			current := h.partition.LeaderEpoch()
			if sp.LeaderEpoch < 0 || sp.LeaderEpoch >= current {
				toStop = append(toStop, sp)
			} else {
				slog.Warn().Str("topic", t.Topic).Int32("partition", t.Partition).Int32("leader_epoch", sp.LeaderEpoch).
					Int32("current_leader_epoch", current).Msg("Ignoring StopReplica request: its leader epoch is older than the partition's")
				codes[i] = ErrFencedLeaderEpoch
			}
		}
	}

	stopped := make(map[tp.TopicPartition]ErrorCode, len(toStop))
	parts := make([]tp.TopicPartition, len(toStop))
	for i, sp := range toStop {
		parts[i] = sp.TopicPartition
	}
	// Fetchers read the partition's state, so they stop before it goes.
	rm.cfg.Fetchers.RemoveFetcherForPartitions(parts)
	rm.cfg.AlterLogDirsFetchers.RemoveFetcherForPartitions(parts)
	// A leaving broker (BeginShutdown) still stops and deletes: the deletes
	// are one batch per dir (a fraction of a second for 10,000), and a
	// replica left hosted would go on as a leader the controller has
	// replaced (a reassignment's removed leader gets only this StopReplica),
	// taking acks=1 writes nobody will ever read, with no resend to remove
	// its log later.
	var toDelete []tp.TopicPartition
	for _, sp := range toStop {
		code, deleteLog := rm.unhostPartition(slog, sp)
		stopped[sp.TopicPartition] = code
		if deleteLog {
			toDelete = append(toDelete, sp.TopicPartition)
		}
	}
	// One batch: a topic deletion of 10,000 partitions costs one fsync and
	// one checkpoint rewrite per log dir, not per partition (DeleteLogs).
	for t, err := range rm.logs.DeleteLogs(toDelete) {
		rm.logger.Error().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Msg("delete log")
		stopped[t] = ErrStorageError
	}
	rm.cfg.Fetchers.ShutdownIdleFetchers()
	rm.cfg.AlterLogDirsFetchers.ShutdownIdleFetchers()
	events := newPartitionEvents(span)
	failed := 0
	for i, sp := range req.Partitions {
		if code, ok := stopped[sp.TopicPartition]; ok {
			codes[i] = code
		}
		if codes[i] != ErrNone {
			failed++
		}
		resp.PartitionErrors = append(resp.PartitionErrors, PartitionError{TopicPartition: sp.TopicPartition, Error: codes[i]})
		if events.Want() {
			events.Add("StopReplica partition", append(partitionAttrs(sp.TopicPartition), attribute.Int("replicad.leader_epoch", int(sp.LeaderEpoch)),
				attribute.Bool("replicad.delete", sp.Delete), attribute.String("replicad.error_code", codes[i].String()))...)
		}
	}
	events.Done()
	span.SetAttributes(attribute.Int("replicad.partition_errors", failed), attribute.String("replicad.error_code", ErrNone.String()))
	slog.Info().Int("partitions", len(req.Partitions)).Int("stopped", len(toStop)).Int("partition_errors", failed).Msg("Completed StopReplica request")
	return resp
}

// replicaTopicID is the topic ID of this broker's replica of t (p is its
// partition, nil when not hosted): the partition's, or its log's.
func (rm *ReplicaManager) replicaTopicID(p *Partition, t tp.TopicPartition) string {
	if p != nil {
		if id := p.TopicID(); id != "" {
			return id
		}
	}
	return rm.logs.TopicID(t)
}

// topicIDsConflict says whether two topic IDs name different topics; an
// unknown ID ("") conflicts with none.
func topicIDsConflict(a, b string) bool { return a != "" && b != "" && a != b }

// stopPartition un-hosts one partition, completes its waiting requests and,
// with Delete, removes its log.
func (rm *ReplicaManager) stopPartition(slog zerolog.Logger, sp StopReplicaPartition) ErrorCode {
	code, deleteLog := rm.unhostPartition(slog, sp)
	if !deleteLog {
		return code
	}
	t := sp.TopicPartition
	if err := rm.logs.DeleteLog(t); err != nil {
		rm.logger.Error().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Msg("delete log")
		return ErrStorageError
	}
	return ErrNone
}

// unhostPartition is stopPartition but for the log itself: with Delete it
// removes the future log and says whether the log is to be deleted, which
// StopReplicas does for all its partitions in one batch.
func (rm *ReplicaManager) unhostPartition(slog zerolog.Logger, sp StopReplicaPartition) (code ErrorCode, deleteLog bool) {
	t := sp.TopicPartition
	rm.partitionsMu.Lock()
	h := rm.partitions[t]
	delete(rm.partitions, t)
	rm.partitionsMu.Unlock()
	if h != nil {
		h.partition.stop()
	}
	slog.Info().Str("topic", t.Topic).Int32("partition", t.Partition).Int32("leader_epoch", sp.LeaderEpoch).Bool("delete", sp.Delete).
		Msg("Stopped replica")
	if !sp.Delete {
		// A move in progress keeps its future log; the next LeaderAndIsr
		// resumes it.
		return ErrNone, false
	}
	if _, ok := rm.logs.FutureDirOf(t); ok {
		if err := rm.logs.DeleteFutureLog(t); err != nil {
			rm.logger.Error().Err(err).Str("topic", t.Topic).Int32("partition", t.Partition).Msg("delete future log")
			return ErrStorageError, false
		}
	}
	_, ok := rm.logs.GetLog(t)
	return ErrNone, ok
}
