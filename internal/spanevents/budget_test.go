package spanevents

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// Events up to the limit, then one summary counting the rest; a span that
// does not record gets a nil Budget that takes everything without effect.
func TestBudget(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	_, span := tp.Tracer("t").Start(context.Background(), "request")
	b := New(span, 3)
	for i := range 10 {
		if b.Want() {
			b.Add("partition", attribute.Int("replicad.partition", i))
		}
	}
	b.Done()
	b.Done() // nothing more to summarise
	span.End()
	evs := rec.Ended()[0].Events()
	if len(evs) != 4 || evs[2].Attributes[0].Value.AsInt64() != 2 || evs[3].Name != SummaryEvent ||
		evs[3].Attributes[0].Key != CountKey || evs[3].Attributes[0].Value.AsInt64() != 7 {
		t.Fatalf("events %v, want 3 partitions (0..2) and a summary of 7", evs)
	}

	_, quiet := noop.NewTracerProvider().Tracer("t").Start(context.Background(), "x")
	nb := New(quiet, 3)
	if nb != nil || nb.Want() || nb.Span() != nil {
		t.Fatal("a non-recording span got a working budget")
	}
	nb.Done()
}
