package fetcher

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
)

func recordingTracer(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("fetcher-test"), rec
}

// addUnder is AddFetcherForPartitions for p, called in a span standing for
// the LeaderAndIsr's FetcherManager.addFetcherForPartitions; it returns
// that span once ended.
func addUnder(t *testing.T, e *env, tracer trace.Tracer, rec *tracetest.SpanRecorder, p tp.TopicPartition, leader core.Broker, ep int32) sdktrace.ReadOnlySpan {
	t.Helper()
	ctx, span := tracer.Start(context.Background(), "FetcherManager.addFetcherForPartitions")
	e.mu.Lock()
	r, m := e.replicas[p], e.mgr
	e.mu.Unlock()
	m.AddFetcherForPartitions(ctx, map[tp.TopicPartition]core.InitialFetchState{p: {Leader: leader, LeaderEpoch: ep, InitOffset: r.LogEndOffset()}})
	span.End()
	adds := spantest.Named(rec, "FetcherManager.addFetcherForPartitions")
	return adds[len(adds)-1]
}

// wantLinkedRoot checks that s is a root span linked to cause.
func wantLinkedRoot(t *testing.T, s sdktrace.ReadOnlySpan, cause sdktrace.ReadOnlySpan) {
	t.Helper()
	if s.Parent().IsValid() {
		t.Errorf("%s has parent %s, want a root", s.Name(), s.Parent().SpanID())
	}
	links := s.Links()
	if len(links) != 1 || !links[0].SpanContext.Equal(cause.SpanContext()) {
		t.Errorf("%s links %v, want the LeaderAndIsr's %s", s.Name(), links, cause.SpanContext().SpanID())
	}
}

// TestTruncationAndStreamSpansLinkToLeaderAndIsr checks that a follower's
// truncation is a Log.truncate span with its offsets, and the fetcher's
// stream opening a ReplicaFetcher.openStream span, both roots linked to the
// span that added the partition; and that the adding span names the fetcher.
func TestTruncationAndStreamSpansLinkToLeaderAndIsr(t *testing.T) {
	t.Run("diverging epoch", func(t *testing.T) {
		e := newEnv(t, "inmem")
		tracer, rec := recordingTracer(t)
		e.cfg.Tracer = tracer
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 5, 0)
		appendBatches(t, ll, 1, 3) // [0,3)
		appendBatches(t, ll, 5, 2) // [3,5)
		fl.script = func(n int, _ *replicadv1.FetchPartition) *replicadv1.FetchPartitionResult {
			if n != 1 {
				return nil
			}
			return &replicadv1.FetchPartitionResult{DivergingEpoch: &replicadv1.EpochEndOffset{Epoch: 1, EndOffset: 3}, HighWatermark: 5, LogEndOffset: 5}
		}
		leader := e.serve(1, fl)
		r := e.follow(p0, 5, 0)
		appendBatches(t, r.log, 1, 3)
		appendBatches(t, r.log, 4, 3) // [3,6) never reached the leader
		e.manager()
		add := addUnder(t, e, tracer, rec, p0, leader, 5)
		waitCaughtUp(t, r, ll)

		a := spantest.Attrs(add.Attributes())
		if got, ok := a["replicad.fetcher_id"]; !ok || got.AsInt64() != int64(FetcherID(p0, 1)) {
			t.Errorf("addFetcherForPartitions replicad.fetcher_id = %v (present %v)", got.Emit(), ok)
		}
		if evs := add.Events(); len(evs) != 1 || evs[0].Name != "fetcher added partition" ||
			spantest.Attrs(evs[0].Attributes)["replicad.leader"].AsInt64() != 1 {
			t.Errorf("addFetcherForPartitions events %v, want one naming the partition's fetcher and leader", evs)
		}

		truncs := spantest.Named(rec, TruncateSpanName)
		if len(truncs) != 1 {
			t.Fatalf("%d %s spans, want 1", len(truncs), TruncateSpanName)
		}
		wantLinkedRoot(t, truncs[0], add)
		ta := spantest.Attrs(truncs[0].Attributes())
		for key, want := range map[string]int64{
			"replicad.truncation_offset": 3, "replicad.log_end_offset": 6, "replicad.new_log_end_offset": 3,
			"replicad.diverging_epoch": 1, "replicad.diverging_end_offset": 3, "replicad.leader_epoch": 5,
			"replicad.leader": 1, "replicad.partition": int64(p0.Partition), "replicad.fetcher_id": int64(FetcherID(p0, 1)),
		} {
			if got, ok := ta[key]; !ok || got.AsInt64() != want {
				t.Errorf("%s %s = %v (present %v), want %d", TruncateSpanName, key, got.Emit(), ok, want)
			}
		}
		if ta["replicad.topic"].AsString() != p0.Topic || ta["replicad.truncation_reason"].AsString() != "diverging epoch" {
			t.Errorf("%s topic %q reason %q", TruncateSpanName, ta["replicad.topic"].AsString(), ta["replicad.truncation_reason"].AsString())
		}

		opens := spantest.Named(rec, OpenStreamSpanName)
		if len(opens) != 1 {
			t.Fatalf("%d %s spans, want 1", len(opens), OpenStreamSpanName)
		}
		wantLinkedRoot(t, opens[0], add)
		if oa := spantest.Attrs(opens[0].Attributes()); oa["replicad.leader"].AsInt64() != 1 || oa["replicad.reconnect"].AsBool() {
			t.Errorf("%s attributes %v", OpenStreamSpanName, opens[0].Attributes())
		}
	})

	t.Run("offset out of range", func(t *testing.T) {
		e := newEnv(t, "inmem")
		tracer, rec := recordingTracer(t)
		e.cfg.Tracer = tracer
		fl := newFakeLeader(t)
		fl.noDivergence = true
		ll := fl.addPartition(p0, 1, 0)
		appendBatches(t, ll, 1, 5)
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		appendBatches(t, r.log, 1, 8)
		e.manager()
		add := addUnder(t, e, tracer, rec, p0, leader, 1)
		waitFor(t, "truncation to the leader's end", func() bool { return len(spantest.Named(rec, TruncateSpanName)) == 1 }, nil)
		s := spantest.Named(rec, TruncateSpanName)[0]
		wantLinkedRoot(t, s, add)
		a := spantest.Attrs(s.Attributes())
		if a["replicad.truncation_offset"].AsInt64() != 5 || a["replicad.log_end_offset"].AsInt64() != 8 ||
			a["replicad.new_log_end_offset"].AsInt64() != 5 || a["replicad.leader_log_end_offset"].AsInt64() != 5 ||
			a["replicad.truncation_reason"].AsString() != "fetch offset beyond the leader's log end" {
			t.Errorf("%s attributes %v", TruncateSpanName, s.Attributes())
		}
		waitCaughtUp(t, r, ll)
	})
}
