package brokerqueue

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// newTracer is a tracer recording every span in memory.
func newTracer(t *testing.T) (trace.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp.Tracer("brokerqueue-test"), rec
}

// sentContexts records the span context each call reached the broker with.
type sentContexts struct {
	mu  sync.Mutex
	scs []trace.SpanContext
}

func (s *sentContexts) add(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scs = append(s.scs, trace.SpanContextFromContext(ctx))
}

func (s *sentContexts) get() []trace.SpanContext {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]trace.SpanContext(nil), s.scs...)
}

// endedSpan finds the recorded span with sc's span id.
func endedSpan(t *testing.T, rec *tracetest.SpanRecorder, sc trace.SpanContext) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == sc.SpanID() {
			return s
		}
	}
	t.Fatalf("no ended span %s", sc.SpanID())
	return nil
}

func attrOf(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// TestSendCarriesEnqueuerSpan checks that a request reaches the broker in the
// trace of the call that queued it: the context the client is called with
// holds a ControllerChannel.send client span whose parent is the enqueuer's
// span. A request merged from several calls is sent under the first traced
// call's span and links the other calls' spans, once each.
func TestSendCarriesEnqueuerSpan(t *testing.T) {
	tracer, rec := newTracer(t)
	gate := make(chan struct{})
	sent := &sentContexts{}
	hold := gateFirst(gate)
	f := &fakeBroker{respond: func(ctx context.Context, n int, c *call) (replicadv1.ErrorCode, error) {
		sent.add(ctx)
		return hold(ctx, n, c)
	}}
	q := newQueue(t, f, func(c *Config) { c.Tracer = tracer })

	ctxA, spanA := tracer.Start(context.Background(), "decision-A")
	q.LeaderAndIsrContext(ctxA, []*replicadv1.PartitionState{st("t", 0, 1)}, []*replicadv1.Broker{br(1, "h1")})
	spanA.End()
	waitCalls(t, f, 1)

	// While A's request is in flight, four calls wait and merge: one outside
	// any trace, then B, C, and B again. B's context is cancelled before its
	// request goes: only its span context counts.
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("t", 3, 1)}, nil)
	ctxB, cancelB := context.WithCancel(context.Background())
	ctxB, spanB := tracer.Start(ctxB, "decision-B")
	q.LeaderAndIsrContext(ctxB, []*replicadv1.PartitionState{st("t", 1, 1)}, nil)
	ctxC, spanC := tracer.Start(context.Background(), "decision-C")
	q.LeaderAndIsrContext(ctxC, []*replicadv1.PartitionState{st("t", 2, 1)}, nil)
	q.LeaderAndIsrContext(ctxB, []*replicadv1.PartitionState{st("t", 4, 1)}, nil)
	spanB.End()
	spanC.End()
	cancelB()
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{"LAI t/0@1 | 1:h1", "LAI t/3@1 t/1@1 t/2@1 t/4@1 | "})

	scs := sent.get()
	if len(scs) != 2 {
		t.Fatalf("%d calls recorded, want 2", len(scs))
	}
	first := endedSpan(t, rec, scs[0])
	if first.Name() != SendSpanName || first.SpanKind() != trace.SpanKindClient {
		t.Errorf("first request's span = %q kind %v, want %q client", first.Name(), first.SpanKind(), SendSpanName)
	}
	if first.Parent().SpanID() != spanA.SpanContext().SpanID() || scs[0].TraceID() != spanA.SpanContext().TraceID() {
		t.Errorf("first request sent under parent %s trace %s, want decision-A %s trace %s",
			first.Parent().SpanID(), scs[0].TraceID(), spanA.SpanContext().SpanID(), spanA.SpanContext().TraceID())
	}
	if len(first.Links()) != 0 {
		t.Errorf("first request has %d links, want none", len(first.Links()))
	}

	merged := endedSpan(t, rec, scs[1])
	if merged.Parent().SpanID() != spanB.SpanContext().SpanID() || scs[1].TraceID() != spanB.SpanContext().TraceID() {
		t.Errorf("merged request sent under parent %s, want decision-B %s (the first traced call)",
			merged.Parent().SpanID(), spanB.SpanContext().SpanID())
	}
	links := merged.Links()
	if len(links) != 1 || !links[0].SpanContext.Equal(spanC.SpanContext()) {
		t.Errorf("merged request links %v, want only decision-C %s", links, spanC.SpanContext().SpanID())
	}
	for key, want := range map[string]attribute.Value{
		"replicad.broker":           attribute.IntValue(int(testBroker)),
		"replicad.broker_epoch":     attribute.Int64Value(testBrokerEpoch),
		"replicad.controller_epoch": attribute.IntValue(int(testControllerEpoch)),
		"replicad.request_kind":     attribute.StringValue("LeaderAndIsr"),
		"replicad.partitions":       attribute.IntValue(4),
		"replicad.merged_calls":     attribute.IntValue(4),
		"replicad.attempt":          attribute.IntValue(1),
		"replicad.error_code":       attribute.StringValue("NONE"),
	} {
		if got, ok := attrOf(merged, key); !ok || got != want {
			t.Errorf("merged request span %s = %v (present %v), want %v", key, got.Emit(), ok, want.Emit())
		}
	}
	if got, _ := attrOf(merged, "replicad.topic_partitions"); len(got.AsStringSlice()) != 4 {
		t.Errorf("replicad.topic_partitions = %v, want the 4 partitions", got.AsStringSlice())
	}
	// decision-C's trace does not end at the controller: it holds a merged
	// span linking the send that carried its partition.
	var inC []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == MergedSpanName {
			inC = append(inC, s)
		}
	}
	if len(inC) != 1 {
		t.Fatalf("%d %s spans, want 1 (for decision-C)", len(inC), MergedSpanName)
	}
	m := inC[0]
	if m.Parent().SpanID() != spanC.SpanContext().SpanID() || len(m.Links()) != 1 ||
		!m.Links()[0].SpanContext.Equal(merged.SpanContext()) {
		t.Errorf("%s: parent %s links %v, want under decision-C %s linking the send %s", MergedSpanName,
			m.Parent().SpanID(), m.Links(), spanC.SpanContext().SpanID(), merged.SpanContext().SpanID())
	}
	if got, _ := attrOf(m, "replicad.error_code"); got.AsString() != "NONE" {
		t.Errorf("%s error_code %q, want NONE", MergedSpanName, got.AsString())
	}
	if got, _ := attrOf(m, "replicad.sent_in_trace"); got.AsString() != merged.SpanContext().TraceID().String() {
		t.Errorf("%s sent_in_trace %q, want %s", MergedSpanName, got.AsString(), merged.SpanContext().TraceID())
	}
}

// TestRetriesStayInTrace checks that every attempt of a request is a send
// span in the enqueuer's trace, the failed one marked as an error.
func TestRetriesStayInTrace(t *testing.T) {
	tracer, rec := newTracer(t)
	sent := &sentContexts{}
	f := &fakeBroker{respond: func(ctx context.Context, n int, _ *call) (replicadv1.ErrorCode, error) {
		sent.add(ctx)
		if n == 0 {
			return 0, status.Error(codes.Unavailable, "broker down")
		}
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}}
	q := newQueue(t, f, func(c *Config) { c.Tracer = tracer })
	ctx, span := tracer.Start(context.Background(), "Controller.electLeader")
	q.StopReplicaContext(ctx, []*replicadv1.StopReplicaPartition{sp("t", 0, 3, false)})
	span.End()
	flush(t, q)

	scs := sent.get()
	if len(scs) != 2 {
		t.Fatalf("%d attempts, want 2", len(scs))
	}
	for i, sc := range scs {
		s := endedSpan(t, rec, sc)
		if s.Parent().SpanID() != span.SpanContext().SpanID() {
			t.Errorf("attempt %d: parent %s, want the enqueuer's %s", i+1, s.Parent().SpanID(), span.SpanContext().SpanID())
		}
		if got, _ := attrOf(s, "replicad.attempt"); got.AsInt64() != int64(i+1) {
			t.Errorf("attempt %d: replicad.attempt = %d", i+1, got.AsInt64())
		}
		wantStatus := otelcodes.Unset
		if i == 0 {
			wantStatus = otelcodes.Error
		}
		if s.Status().Code != wantStatus {
			t.Errorf("attempt %d: status %v, want %v", i+1, s.Status().Code, wantStatus)
		}
	}
}

// TestUntracedCallStartsOwnTrace checks that a call made outside any trace
// is still sent in a span of its own (a root), not in some other trace.
func TestUntracedCallStartsOwnTrace(t *testing.T) {
	tracer, rec := newTracer(t)
	sent := &sentContexts{}
	f := &fakeBroker{respond: func(ctx context.Context, _ int, _ *call) (replicadv1.ErrorCode, error) {
		sent.add(ctx)
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}}
	q := newQueue(t, f, func(c *Config) { c.Tracer = tracer })
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, nil)
	flush(t, q)
	scs := sent.get()
	if len(scs) != 1 || !scs[0].IsValid() {
		t.Fatalf("sent with span contexts %v, want one valid", scs)
	}
	if s := endedSpan(t, rec, scs[0]); s.Parent().IsValid() {
		t.Errorf("untraced call's send span has parent %s, want a root", s.Parent().SpanID())
	}
}
