package core

import (
	"context"
	"errors"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// Idempotent produce (issue 21): every replica's log keeps the producer
// state (core/log/producerstate); the leader checks each v1 batch against
// it with the append. This file maps its outcomes to error codes, and logs
// and traces its state changes:
//
//   - Partition.fenceProducerEpoch: the first batch of a newer epoch of a
//     producer at the leader (topic, partition, producer_id,
//     producer_epoch, fenced_epoch, leader_epoch, offset);
//   - ReplicaManager.expireProducerIds: producers forgotten after
//     --producer-id-expiration, at the retention check (partitions,
//     producers; one event per partition);
//   - Log.rebuildProducerState: the state rebuilt from the remaining log
//     after a truncation (topic, partition, reason, log_end_offset,
//     snapshot_offset, batches, producers_before, producers).

// MaxDescribedProducers caps the producers a partition's describe lists.
const MaxDescribedProducers = 100

// producerErrorCode maps the log's producer-state refusals to their codes;
// ErrNone for any other error.
func producerErrorCode(err error) ErrorCode {
	switch {
	case errors.Is(err, log.ErrOutOfOrderSequence):
		return ErrOutOfOrderSequenceNumber
	case errors.Is(err, log.ErrInvalidProducerEpoch):
		return ErrInvalidProducerEpoch
	case errors.Is(err, log.ErrUnknownProducerID):
		return ErrUnknownProducerID
	}
	return ErrNone
}

// producerFenced logs and traces a leader's append that fenced an older
// epoch of its producer.
func (p *Partition) producerFenced(producerID int64, epoch, fenced int16, leaderEpoch int32, offset int64) {
	p.env.stateLog.Info().Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
		Int64("producer_id", producerID).Int16("producer_epoch", epoch).Int16("fenced_epoch", fenced).
		Int32("leader_epoch", leaderEpoch).Int64("offset", offset).
		Msg("Producer epoch fenced: the producer's older epoch is refused from now on")
	_, span := p.env.tracer.Start(context.Background(), "Partition.fenceProducerEpoch", trace.WithAttributes(
		append(partitionAttrs(p.topicPartition),
			attribute.Int64("replicad.producer_id", producerID), attribute.Int("replicad.producer_epoch", int(epoch)),
			attribute.Int("replicad.fenced_epoch", int(fenced)), attribute.Int("replicad.leader_epoch", int(leaderEpoch)),
			attribute.Int64("replicad.offset", offset))...))
	span.End()
}

// producerStateRebuilt is the log manager's OnProducerStateRebuilt: it logs
// and traces a rebuild after a truncation. It runs under the log's locks.
func producerStateRebuilt(stateLog zerolog.Logger, tracer trace.Tracer) func(tp.TopicPartition, log.ProducerRebuild) {
	return func(t tp.TopicPartition, r log.ProducerRebuild) {
		stateLog.Info().Str("topic", t.Topic).Int32("partition", t.Partition).Str("reason", r.Reason).
			Int64("log_end_offset", r.EndOffset).Int64("snapshot_offset", r.SnapshotOffset).Int("batches", r.Batches).
			Int("producers_before", r.Before).Int("producers", r.After).
			Msg("Producer state rebuilt from the remaining log after a truncation")
		if tracer == nil {
			return
		}
		_, span := tracer.Start(context.Background(), "Log.rebuildProducerState", trace.WithAttributes(
			append(partitionAttrs(t), attribute.String("replicad.reason", r.Reason),
				attribute.Int64("replicad.log_end_offset", r.EndOffset), attribute.Int64("replicad.snapshot_offset", r.SnapshotOffset),
				attribute.Int("replicad.batches", r.Batches), attribute.Int("replicad.producers_before", r.Before),
				attribute.Int("replicad.producers", r.After))...))
		span.End()
	}
}

// expireProducers forgets, on every online replica, the producers idle past
// the producer ID expiration (Kafka's removeExpiredProducers, run by its
// producer-expiration check; here on the retention loop).
func (rm *ReplicaManager) expireProducers() {
	nowMs := rm.cfg.Clock.Now().UnixMilli()
	var span trace.Span
	var events int
	partitions, producers := 0, 0
	for _, p := range rm.onlinePartitions() {
		p.mu.RLock()
		l, stopped := p.log, p.stopped
		p.mu.RUnlock()
		if l == nil || stopped {
			continue
		}
		gone := l.RemoveExpiredProducers(nowMs)
		if len(gone) == 0 {
			continue
		}
		if span == nil {
			_, span = rm.tracer.Start(context.Background(), "ReplicaManager.expireProducerIds")
			defer span.End()
		}
		partitions++
		producers += len(gone)
		rm.stateLog.Info().Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
			Int("producers", len(gone)).Ints64("producer_ids", gone[:min(len(gone), 20)]).
			Msg("Producer IDs expired: idle past the producer ID expiration")
		if events < MaxPartitionEvents {
			events++
			span.AddEvent("producers expired", trace.WithAttributes(append(partitionAttrs(p.topicPartition),
				attribute.Int("replicad.producers", len(gone)))...))
		}
	}
	if span != nil {
		span.SetAttributes(attribute.Int("replicad.partitions", partitions), attribute.Int("replicad.producers", producers))
	}
}
