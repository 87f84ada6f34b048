package spanevents

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// SummaryEvent is the event that counts the items left out, in its
// CountKey attribute.
const (
	SummaryEvent = "partitions not itemised"
	CountKey     = attribute.Key("replicad.partitions")
)

// Budget adds at most its limit of events to one span. A nil *Budget (the
// span does not record) takes nothing and costs nothing, so callers need
// not check; Want tells whether to build an event's attributes at all.
type Budget struct {
	span    trace.Span
	limit   int
	added   int
	omitted int
}

// New returns a Budget of limit events on span, nil when span does not
// record.
func New(span trace.Span, limit int) *Budget {
	if !span.IsRecording() {
		return nil
	}
	return &Budget{span: span, limit: limit}
}

// Want reports whether one more event fits; an item that does not is
// counted for the summary. Call it before building the attributes.
func (b *Budget) Want() bool {
	if b == nil {
		return false
	}
	if b.added >= b.limit {
		b.omitted++
		return false
	}
	return true
}

// Add adds an event; call it after Want said yes.
func (b *Budget) Add(name string, attrs ...attribute.KeyValue) {
	b.added++
	b.span.AddEvent(name, trace.WithAttributes(attrs...))
}

// Done adds the summary of the items left out, if any.
func (b *Budget) Done() {
	if b == nil || b.omitted == 0 {
		return
	}
	b.span.AddEvent(SummaryEvent, trace.WithAttributes(CountKey.Int(b.omitted)))
	b.omitted = 0
}

// Span is the span the budget adds to (nil for a nil Budget).
func (b *Budget) Span() trace.Span {
	if b == nil {
		return nil
	}
	return b.span
}
