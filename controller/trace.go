package controller

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/internal/spanevents"
)

// MaxPartitionEvents caps the per-partition events on one span: a decision
// that changes more partitions (fencing a broker that led thousands) gets
// MaxPartitionEvents events and then one "partitions not itemised" event
// with the count, so that a large failover stays cheap to trace.
const MaxPartitionEvents = 100

// partitionChange is one partition's state before and after a decision.
// old is the zero Partition (Leader 0, LeaderEpoch 0) for a new partition,
// with hadOld false.
type partitionChange struct {
	old    store.Partition
	hadOld bool
	new    store.Partition
}

// tracePartitionChanges records the changes on ctx's span: one event per
// partition (at most MaxPartitionEvents, then a summary), and, when there is
// one partition, its state as the span's attributes too.
func tracePartitionChanges(ctx context.Context, event string, changes []partitionChange) {
	b := newEventBudget(ctx)
	if b == nil || len(changes) == 0 {
		return
	}
	for _, ch := range changes {
		if b.Want() {
			b.Add(event, changeAttrs(ch)...)
		}
	}
	b.Done()
	if len(changes) == 1 {
		b.Span().SetAttributes(changeAttrs(changes[0])...)
	}
	b.Span().SetAttributes(attribute.Int("replicad.partitions_changed", len(changes)))
}

// newEventBudget is the event budget of ctx's span: MaxPartitionEvents, nil
// when the span does not record (then nothing need be built).
func newEventBudget(ctx context.Context) *spanevents.Budget {
	return spanevents.New(trace.SpanFromContext(ctx), MaxPartitionEvents)
}

func changeAttrs(ch partitionChange) []attribute.KeyValue {
	p := ch.new
	attrs := []attribute.KeyValue{
		attribute.String("replicad.topic", p.Topic),
		attribute.Int("replicad.partition", int(p.Partition)),
		attribute.Int("replicad.leader", int(p.Leader)),
		attribute.Int("replicad.leader_epoch", int(p.LeaderEpoch)),
		attribute.Int("replicad.partition_epoch", int(p.PartitionEpoch)),
		attribute.IntSlice("replicad.isr", toInts(p.ISR)),
		attribute.IntSlice("replicad.replicas", toInts(p.Replicas)),
	}
	if ch.hadOld {
		attrs = append(attrs,
			attribute.Int("replicad.old_leader", int(ch.old.Leader)),
			attribute.Int("replicad.old_leader_epoch", int(ch.old.LeaderEpoch)),
			attribute.IntSlice("replicad.old_isr", toInts(ch.old.ISR)),
		)
	}
	return attrs
}
