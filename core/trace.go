package core

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/internal/spanevents"
)

// Tracing of state changes (SPEC "Tracing"). Every controller request and
// every transition it causes is a span; its attributes are under replicad.*:
//
//   - ReplicaManager.becomeLeaderOrFollower: controller_id, controller_epoch,
//     broker_epoch, partitions, became_leader, became_follower,
//     partition_errors, error_code; an event "LeaderAndIsr partition ignored"
//     per partition not applied (reason, leader_epoch, current_leader_epoch,
//     error_code), at most MaxIgnoredEvents in a request above
//     MaxPartitionSpans partitions.
//   - ReplicaManager.makeLeaders / makeFollowers (partitions,
//     controller_epoch, became_*; fetchers_readded for makeFollowers: the
//     followers that kept their leader and epoch but had no fetcher, outcome
//     "fetcher added back"), with a child Partition.makeLeader /
//     Partition.makeFollower per partition: topic, partition, leader,
//     old_leader, leader_epoch, old_leader_epoch, controller_epoch,
//     partition_epoch, isr, replicas, is_new_replica, then is_new_leader
//     (leader) or changed and outcome (follower), error_code, high_watermark,
//     log_end_offset.
//   - FetcherManager.addFetcherForPartitions (partitions, leaders; for one
//     partition its topic, partition, leader, leader_epoch, fetch_offset and
//     fetcher_id; the fetcher package adds an event per partition).
//   - ReplicaManager.stopReplicas: controller_id, controller_epoch,
//     broker_epoch, partitions, partition_errors, error_code; an event
//     "StopReplica partition" per partition.
//   - Partition.shrinkIsr / Partition.expandIsr on the leader, roots from
//     proposal to outcome: old_isr, proposed_isr, out_of_sync_replicas or
//     replica, leader_epoch, old_partition_epoch, high_watermark,
//     log_end_offset, then isr, partition_epoch, error_code, superseded,
//     outcome; an event "retried" per answer that submitted the change
//     again. The IsrChanger gets the span context (IsrChange.SpanContext),
//     so the controller's AlterPartition joins the trace.
//   - ReplicaManager.deleteStrayLog (topic, partition, stray_topic_id,
//     topic_id, error_code), under the LeaderAndIsr naming another topic ID.
//   - Partition.repairDamagedLog under a Partition.makeFollower of a log
//     damaged at rest: the transition's attributes, damaged_offset,
//     recovery_point, reason, the damage as its recorded error.
//   - ReplicaManager.handleLogDirFailure (a root: log_dir, partitions) and
//     ReplicaManager.markPartitionOffline (topic, partition, reason; offset
//     and the recorded damage for a corrupt batch), under it, under the
//     LeaderAndIsr whose log could not be created, or under the read that
//     met a damaged batch.
//   - ReplicaManager.checkpointHighWatermarks (log_dirs, failed_log_dirs) when
//     one is asked for (the RPC, shutdown); the periodic checkpoint makes no
//     span, a dir it fails being traced as handleLogDirFailure.
//   - ReplicaManager.alterReplicaLogDirs.
//   - The idempotent producers' state (producer_state.go):
//     Partition.fenceProducerEpoch (a leader's first batch of a newer
//     producer epoch), ReplicaManager.expireProducerIds (producers idle
//     past --producer-id-expiration, at the retention check) and
//     Log.rebuildProducerState (the state rebuilt after a truncation),
//     each a root span, with producer_id, producer_epoch, fenced_epoch,
//     producers, producers_before, batches, snapshot_offset.
//
// A request touching many partitions must stay cheap to trace: a
// LeaderAndIsr of n partitions has one child span per partition transition
// (Partition.makeLeader, Partition.makeFollower) only while n <=
// MaxPartitionSpans. Above that, the makeLeaders / makeFollowers span gets
// one event per partition instead, for at most MaxPartitionEvents
// partitions, and one "partitions not itemised" event counting the rest.
// The same budget applies to the other per-partition events (stale epochs,
// StopReplica outcomes, partitions taken offline). Nothing per partition is
// built when the span is not recording (tracing off, or not sampled).
const (
	// MaxPartitionSpans is the largest number of partitions of one request
	// that get a child span each.
	MaxPartitionSpans = 100
	// MaxPartitionEvents caps the per-partition events of one span. The
	// OpenTelemetry SDK keeps 128 events per span by default: this leaves
	// room for the summary and the span's other events.
	MaxPartitionEvents = 100
	// MaxIgnoredEvents caps the "LeaderAndIsr partition ignored" events of a
	// request above MaxPartitionSpans partitions: a large request the broker
	// mostly ignores (a repeated one) is itself cheap, and must stay so.
	MaxIgnoredEvents = 10
)

// newPartitionEvents is the event budget of a request's span:
// MaxPartitionEvents, nil when the span does not record.
func newPartitionEvents(span trace.Span) *spanevents.Budget {
	return spanevents.New(span, MaxPartitionEvents)
}

func partitionAttrs(t tp.TopicPartition) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("replicad.topic", t.Topic), attribute.Int("replicad.partition", int(t.Partition))}
}

// transitionAttrs describe a LeaderAndIsr partition state and the
// partition's leadership before it.
func transitionAttrs(tr partitionTransition) []attribute.KeyValue {
	st := tr.state
	return append(partitionAttrs(st.TopicPartition),
		attribute.Int("replicad.leader", int(st.Leader)),
		attribute.Int("replicad.old_leader", int(tr.oldLeader)),
		attribute.Int("replicad.leader_epoch", int(st.LeaderEpoch)),
		attribute.Int("replicad.old_leader_epoch", int(tr.oldLeaderEpoch)),
		attribute.Int("replicad.controller_epoch", int(st.ControllerEpoch)),
		attribute.Int("replicad.partition_epoch", int(st.PartitionEpoch)),
		attribute.IntSlice("replicad.isr", ints(st.ISR)),
		attribute.IntSlice("replicad.replicas", ints(st.Replicas)),
		attribute.IntSlice("replicad.adding_replicas", ints(st.AddingReplicas)),
		attribute.Bool("replicad.is_new_replica", st.IsNew),
	)
}

// offsetAttrs are the partition's HW and LEO (nothing before its log exists).
func offsetAttrs(p *Partition) []attribute.KeyValue {
	p.mu.RLock()
	l := p.log
	p.mu.RUnlock()
	if l == nil {
		return nil
	}
	return []attribute.KeyValue{
		attribute.Int64("replicad.high_watermark", l.HighWatermark()),
		attribute.Int64("replicad.log_end_offset", l.LogEndOffset()),
	}
}

func ints(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// requestStateLog is the state-change logger of one controller request:
// controller_id, controller_epoch and, when the request is traced, trace_id
// on every line (Kafka puts the correlation id there; the trace id finds
// the request in Jaeger).
func (rm *ReplicaManager) requestStateLog(ctx context.Context, controllerID, controllerEpoch int32) zerolog.Logger {
	c := rm.stateLog.With().Int32("controller_id", controllerID).Int32("controller_epoch", controllerEpoch)
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		c = c.Str("trace_id", sc.TraceID().String())
	}
	return c.Logger()
}

// stateFields adds a LeaderAndIsr partition state's fields to a log line
// (nil-safe, like every zerolog event method).
func stateFields(e *zerolog.Event, st PartitionState) *zerolog.Event {
	return e.Str("topic", st.TopicPartition.Topic).Int32("partition", st.TopicPartition.Partition).
		Int32("leader", st.Leader).Int32("leader_epoch", st.LeaderEpoch).Ints32("isr", st.ISR).
		Int32("partition_epoch", st.PartitionEpoch)
}
