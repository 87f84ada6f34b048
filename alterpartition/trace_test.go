package alterpartition

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
)

// TestRequestCarriesChangeTrace checks that an AlterPartition request goes
// in the trace of the ISR change it carries (its Partition.shrinkIsr or
// expandIsr span), so the controller's side joins the leader's trace.
func TestRequestCarriesChangeTrace(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })

	traceparents := make(chan string, 4)
	ctl := startController(t, func(ctx context.Context, _ int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		traceparents <- strings.Join(md.Get("traceparent"), ",")
		return accept(req), nil
	})
	m := newManager(t, ctl.addr)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xa, 0xb}, SpanID: trace.SpanID{0xc}, TraceFlags: trace.FlagsSampled})
	change := expansion("orders", 0, 1, 2)
	change.SpanContext = sc
	results, _ := submit(m, change)
	await(t, results, "result")
	tp := await(t, traceparents, "traceparent")
	if !strings.Contains(tp, sc.TraceID().String()) {
		t.Fatalf("AlterPartition sent with traceparent %q, want the change's trace %s", tp, sc.TraceID())
	}
}

// TestBatchedChangesEachLeadToTheRequest: a request carrying several traced
// ISR changes is sent in the first one's trace and links the others; each
// other change's trace gets a span linking back to the send, so no ISR
// change's trace ends at the leader.
func TestBatchedChangesEachLeadToTheRequest(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	caller := tp.Tracer("leader")

	release := make(chan struct{})
	ctl := startController(t, holdFirst(release))
	m, err := New(Config{Controller: ctl.addr, BrokerID: 1, BrokerEpoch: func() int64 { return 3 },
		MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: zerolog.Nop(), TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })

	first, _ := submit(m, expansion("orders", 0, 1, 2))
	await(t, ctl.received, "first request")
	var changes []trace.Span
	var results []<-chan core.IsrChangeResult
	for p := int32(1); p <= 3; p++ {
		_, span := caller.Start(context.Background(), "Partition.shrinkIsr")
		changes = append(changes, span)
		c := expansion("orders", p, 1, 2)
		c.SpanContext = span.SpanContext()
		ch, _ := submit(m, c)
		results = append(results, ch)
	}
	close(release)
	await(t, first, "first result")
	for _, ch := range results {
		await(t, ch, "result")
	}
	for _, s := range changes {
		s.End()
	}

	var send sdktrace.ReadOnlySpan
	for _, s := range spantest.Named(rec, SendSpanName) {
		if a := spantest.Attrs(s.Attributes()); a["replicad.partitions"].AsInt64() == 3 {
			send = s
		}
	}
	if send == nil {
		t.Fatalf("no %s span of the 3-change request", SendSpanName)
	}
	if send.Parent().SpanID() != changes[0].SpanContext().SpanID() || len(send.Links()) != 2 {
		t.Fatalf("send: parent %s, %d links; want under the first change %s, linking the other 2",
			send.Parent().SpanID(), len(send.Links()), changes[0].SpanContext().SpanID())
	}
	if a := spantest.Attrs(send.Attributes()); a["replicad.error_code"].AsString() != "NONE" {
		t.Errorf("send error_code %q, want NONE", a["replicad.error_code"].AsString())
	}
	batched := spantest.Named(rec, BatchedSpanName)
	if len(batched) != 2 {
		t.Fatalf("%d %s spans, want 2", len(batched), BatchedSpanName)
	}
	parents := map[trace.SpanID]bool{}
	for _, b := range batched {
		parents[b.Parent().SpanID()] = true
		if len(b.Links()) != 1 || b.Links()[0].SpanContext.SpanID() != send.SpanContext().SpanID() {
			t.Errorf("%s links %v, want the send %s", BatchedSpanName, b.Links(), send.SpanContext().SpanID())
		}
	}
	if !parents[changes[1].SpanContext().SpanID()] || !parents[changes[2].SpanContext().SpanID()] {
		t.Errorf("%s spans under %v, want one under each later change", BatchedSpanName, parents)
	}
}
