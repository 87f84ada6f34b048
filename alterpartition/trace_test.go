package alterpartition

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
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
