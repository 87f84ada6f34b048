package fetcher

import (
	"context"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/internal/spanevents"
)

// Tracing. A fetcher works on its own (its loop has no caller), so its spans
// are roots that LINK to the LeaderAndIsr that caused them: each partition's
// fetch state keeps the span context of the FetcherManager.addFetcherForPartitions
// span (in the LeaderAndIsr's trace) that added it.
//
//   - Log.truncate: a follower truncating its log (diverging epoch, or an
//     offset out of the leader's range), linked to the partition's cause.
//   - ReplicaFetcher.openStream: a fetcher (re)opening its stream to the
//     leader, the first time or after the stream broke, linked to the causes
//     of the partitions it is about to fetch (at most maxLinks).
//
// AddFetcherForPartitions adds, on the span in its context, one event per
// partition (at most core.MaxPartitionEvents) naming its fetcher.

// maxLinks caps the links of a ReplicaFetcher.openStream span.
const maxLinks = 16

// TruncateSpanName is the span of a follower's truncation.
const TruncateSpanName = "Log.truncate"

// OpenStreamSpanName is the span of a fetcher opening its stream.
const OpenStreamSpanName = "ReplicaFetcher.openStream"

// linkTo is a link to the span that added a partition, none when unknown.
func linkTo(cause trace.SpanContext) []trace.Link {
	if !cause.IsValid() {
		return nil
	}
	return []trace.Link{{SpanContext: cause, Attributes: []attribute.KeyValue{attribute.String("replicad.link", "caused by")}}}
}

// startTruncate starts the Log.truncate span of a truncation of t to offset.
func (f *fetcher) startTruncate(t tp.TopicPartition, st *partitionState, reason string, offset int64, attrs ...attribute.KeyValue) trace.Span {
	r := st.replica
	_, span := f.cfg.Tracer.Start(context.Background(), TruncateSpanName, trace.WithNewRoot(), trace.WithLinks(linkTo(st.cause)...),
		trace.WithAttributes(append([]attribute.KeyValue{
			attribute.String("replicad.topic", t.Topic),
			attribute.Int("replicad.partition", int(t.Partition)),
			attribute.Int("replicad.fetcher_id", f.key.FetcherID),
			attribute.Int("replicad.leader", int(f.sourceBroker.ID)),
			attribute.Int("replicad.leader_epoch", int(st.leaderEpoch)),
			attribute.String("replicad.truncation_reason", reason),
			attribute.Int64("replicad.truncation_offset", offset),
			attribute.Int64("replicad.log_end_offset", r.LogEndOffset()),
			attribute.Int64("replicad.high_watermark", r.HighWatermark()),
			attribute.Int("replicad.latest_epoch", int(r.LatestEpoch())),
		}, attrs...)...))
	return span
}

// endTruncate ends a Log.truncate span with the log's end after it.
func endTruncate(span trace.Span, r Replica, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "truncation failed")
	} else if span.IsRecording() {
		span.SetAttributes(attribute.Int64("replicad.new_log_end_offset", r.LogEndOffset()),
			attribute.Int("replicad.new_latest_epoch", int(r.LatestEpoch())))
	}
	span.End()
}

// startOpenStream starts the span of opening the fetcher's stream, linked to
// the distinct causes of the partitions it is about to fetch.
func (f *fetcher) startOpenStream(ctx context.Context, requested map[tp.TopicPartition]*partitionState, attempt int, reconnect bool) (context.Context, trace.Span) {
	var links []trace.Link
	for _, st := range requested {
		if len(links) == maxLinks {
			break
		}
		if st.cause.IsValid() && !slices.ContainsFunc(links, func(l trace.Link) bool { return l.SpanContext.Equal(st.cause) }) {
			links = append(links, linkTo(st.cause)...)
		}
	}
	return f.cfg.Tracer.Start(ctx, OpenStreamSpanName, trace.WithNewRoot(), trace.WithLinks(links...), trace.WithAttributes(
		attribute.Int("replicad.leader", int(f.sourceBroker.ID)),
		attribute.String("replicad.leader_addr", f.sourceBroker.Addr()),
		attribute.Int("replicad.fetcher_id", f.key.FetcherID),
		attribute.Int("replicad.partitions", len(requested)),
		attribute.Int("replicad.attempt", attempt),
		attribute.Bool("replicad.reconnect", reconnect),
	))
}

// traceAdded records the partitions handed to fetchers on the span in ctx
// (FetcherManager.addFetcherForPartitions): one event each, within
// core.MaxPartitionEvents, and the fetcher id as an attribute when there is
// one partition. A nil *traceAdded (the span does not record) does nothing.
type traceAdded struct{ *spanevents.Budget }

func newTraceAdded(ctx context.Context) traceAdded {
	return traceAdded{spanevents.New(trace.SpanFromContext(ctx), core.MaxPartitionEvents)}
}

func (a traceAdded) add(t tp.TopicPartition, key fetcherKey, init core.InitialFetchState, offset int64, single bool) {
	if a.Budget == nil {
		return
	}
	if single {
		a.Span().SetAttributes(attribute.Int("replicad.fetcher_id", key.FetcherID))
	}
	if !a.Want() {
		return
	}
	a.Add("fetcher added partition",
		attribute.String("replicad.topic", t.Topic),
		attribute.Int("replicad.partition", int(t.Partition)),
		attribute.Int("replicad.fetcher_id", key.FetcherID),
		attribute.Int("replicad.leader", int(init.Leader.ID)),
		attribute.Int("replicad.leader_epoch", int(init.LeaderEpoch)),
		attribute.Int64("replicad.fetch_offset", offset),
	)
}
