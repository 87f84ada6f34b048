package controller

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/brokerqueue"
	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
)

// tracedCluster is startCluster with every span recorded.
func tracedCluster(t *testing.T, n int32) (*harness, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return startCluster(t, n, withTracerProvider(tp)), rec, tp.Tracer("client")
}

func spanByID(rec *tracetest.SpanRecorder, id trace.SpanID) sdktrace.ReadOnlySpan {
	for _, s := range rec.Ended() {
		if s.SpanContext().SpanID() == id {
			return s
		}
	}
	return nil
}

// laiSpanFor is the span context of the LeaderAndIsr broker id received with
// p's stored state, and whether it received one.
func laiSpanFor(h *harness, id int32, p store.Partition) (trace.SpanContext, bool) {
	f := h.fake(id)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.lai {
		for _, s := range r.GetPartitionStates() {
			if s.GetTopic() == p.Topic && s.GetPartition() == p.Partition && s.GetLeaderEpoch() == p.LeaderEpoch {
				return f.laiSpans[i], true
			}
		}
	}
	return trace.SpanContext{}, false
}

// wantSentUnder checks that broker id got p's LeaderAndIsr in a
// ControllerChannel.send span whose parent is decision, or, when the broker
// queue merged that request into one queued before it (which keeps the
// earlier trace), a send span linked to decision.
func wantSentUnder(t *testing.T, h *harness, rec *tracetest.SpanRecorder, id int32, p store.Partition, decision sdktrace.ReadOnlySpan) {
	t.Helper()
	waitLAI(t, h, id, p)
	sc, _ := laiSpanFor(h, id, p)
	var send sdktrace.ReadOnlySpan
	waitFor(t, "the send span to end", func() bool { send = spanByID(rec, sc.SpanID()); return send != nil })
	if send.Name() != brokerqueue.SendSpanName {
		t.Errorf("broker %d got the LeaderAndIsr in span %q, want %q", id, send.Name(), brokerqueue.SendSpanName)
	}
	want := decision.SpanContext()
	linked := slices.ContainsFunc(send.Links(), func(l sdktrace.Link) bool { return l.SpanContext.Equal(want) })
	if send.Parent().SpanID() != want.SpanID() && !linked {
		t.Errorf("broker %d got the LeaderAndIsr in span %q with parent %s (trace %s), neither under nor linked to %s %s (trace %s)",
			id, send.Name(), send.Parent().SpanID(), sc.TraceID(), decision.Name(), want.SpanID(), want.TraceID())
	}
	if got := spantest.Attrs(send.Attributes())["replicad.broker"]; got.AsInt64() != int64(id) {
		t.Errorf("send span to broker %d has replicad.broker %d", id, got.AsInt64())
	}
}

// TestElectionIsOneTrace checks that an election made under a client's span
// reaches every replica in that trace: client -> Controller.electLeader ->
// ControllerChannel.send -> the broker, and that the decision span records
// the partition's old and new leadership.
func TestElectionIsOneTrace(t *testing.T) {
	h, rec, client := tracedCluster(t, 3)
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	ctx, span := client.Start(context.Background(), "ctlclient elect")
	leader := int32(2)
	resp, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0, Leader: &leader})
	span.End()
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("ElectLeader: %v %v", resp, err)
	}
	p := wantPartition(t, h, "t", 0, 2, 1, 1, 1, 2, 3)
	elects := spantest.Named(rec, "Controller.electLeader")
	if len(elects) != 1 {
		t.Fatalf("%d Controller.electLeader spans, want 1", len(elects))
	}
	elect := elects[0]
	if elect.Parent().SpanID() != span.SpanContext().SpanID() {
		t.Errorf("Controller.electLeader parent %s, want the client's %s", elect.Parent().SpanID(), span.SpanContext().SpanID())
	}
	for _, id := range p.Replicas {
		wantSentUnder(t, h, rec, id, p, elect)
	}
	a := spantest.Attrs(elect.Attributes())
	for key, want := range map[string]int64{"replicad.leader": 2, "replicad.old_leader": 1, "replicad.leader_epoch": 1, "replicad.old_leader_epoch": 0} {
		if got, ok := a[key]; !ok || got.AsInt64() != want {
			t.Errorf("Controller.electLeader %s = %v (present %v), want %d", key, got.Emit(), ok, want)
		}
	}
	if got := a["replicad.isr"].AsInt64Slice(); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("Controller.electLeader replicad.isr = %v", got)
	}
	if evs := elect.Events(); len(evs) != 1 || evs[0].Name != "partition state change" {
		t.Errorf("Controller.electLeader events %v, want one partition state change", evs)
	}
}

// TestFailoverIsOneTrace checks that fencing a silent broker is one trace
// (a root Controller.fenceBrokers span, the session check has no caller)
// that reaches the brokers taking over.
func TestFailoverIsOneTrace(t *testing.T) {
	h, rec, _ := tracedCluster(t, 3)
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	h.expire(2, 3)
	p := wantPartition(t, h, "t", 0, 2, 1, 1, 2, 3)
	fences := spantest.Named(rec, "Controller.fenceBrokers")
	if len(fences) != 1 {
		t.Fatalf("%d Controller.fenceBrokers spans, want 1", len(fences))
	}
	if fences[0].Parent().IsValid() {
		t.Errorf("Controller.fenceBrokers has parent %s, want a root", fences[0].Parent().SpanID())
	}
	for _, id := range []int32{2, 3} {
		wantSentUnder(t, h, rec, id, p, fences[0])
	}
}

// TestAlterPartitionTraced checks that ISR changes show on the controller's
// Controller.alterPartition span: an accepted one as an "isr change" event
// with the old and new ISR, a rejected one with its error code.
func TestAlterPartitionTraced(t *testing.T) {
	h, rec, _ := tracedCluster(t, 3)
	h.createTopic("t", 1, 3)
	p := h.part("t", 0)
	h.mustAlter(1, p, 1, 2)
	h.alter(1, p, 1, 3) // stale partition epoch
	spans := spantest.Named(rec, "Controller.alterPartition")
	if len(spans) != 2 {
		t.Fatalf("%d Controller.alterPartition spans, want 2", len(spans))
	}
	ok, rejected := spans[0], spans[1]
	if evs := ok.Events(); len(evs) != 1 || evs[0].Name != "isr change" {
		t.Fatalf("accepted AlterPartition events %v, want one isr change", evs)
	}
	ev := spantest.Attrs(ok.Events()[0].Attributes)
	if !slices.Equal(ev["replicad.old_isr"].AsInt64Slice(), []int64{1, 2, 3}) || !slices.Equal(ev["replicad.isr"].AsInt64Slice(), []int64{1, 2}) ||
		ev["replicad.topic"].AsString() != "t" || ev["replicad.partition_epoch"].AsInt64() != 1 {
		t.Errorf("isr change event attributes %v", ok.Events()[0].Attributes)
	}
	if evs := rejected.Events(); len(evs) != 1 || evs[0].Name != "isr change rejected" ||
		spantest.Attrs(evs[0].Attributes)["replicad.error_code"].AsString() != "INVALID_UPDATE_VERSION" {
		t.Errorf("rejected AlterPartition events %v, want one isr change rejected with INVALID_UPDATE_VERSION", evs)
	}
}

// TestPartitionEventsCapped checks that a decision changing more than
// MaxPartitionEvents partitions itemises MaxPartitionEvents and summarises
// the rest.
func TestPartitionEventsCapped(t *testing.T) {
	h, rec, _ := tracedCluster(t, 1)
	const n = MaxPartitionEvents + 50
	h.createTopic("big", n, 1)
	spans := spantest.Named(rec, "Controller.createTopic")
	if len(spans) != 1 {
		t.Fatalf("%d Controller.createTopic spans, want 1", len(spans))
	}
	evs := spans[0].Events()
	if len(evs) != MaxPartitionEvents+1 {
		t.Fatalf("%d events, want %d itemised + 1 summary", len(evs), MaxPartitionEvents)
	}
	last := evs[len(evs)-1]
	if last.Name != "partitions not itemised" || spantest.Attrs(last.Attributes)["replicad.partitions"].AsInt64() != n-MaxPartitionEvents {
		t.Errorf("last event %q %v, want the summary of %d partitions", last.Name, last.Attributes, n-MaxPartitionEvents)
	}
}

// failingPartitionWrites is a store whose partition writes fail while fail
// is set.
type failingPartitionWrites struct {
	store.Store
	fail atomic.Bool
}

func (f *failingPartitionWrites) UpdatePartitions(ctx context.Context, updates []store.PartitionUpdate) error {
	if f.fail.Load() {
		return errors.New("injected store failure")
	}
	return f.Store.UpdatePartitions(ctx, updates)
}

// TestRetriedMoveIsOneTrace: a fencing whose move fails is retried after a
// backoff (not at every session check: a store that stays down would fail,
// and trace, twice a second), and that retry is a root trace holding what
// the brokers were sent.
func TestRetriedMoveIsOneTrace(t *testing.T) {
	st := &failingPartitionWrites{Store: store.NewMemory()}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	h := startCluster(t, 3, withTracerProvider(tp), withStore(st))
	h.createTopic("t", 1, 3) // [1 2 3], leader 1

	st.fail.Store(true)
	h.expire(2, 3)
	wantPartition(t, h, "t", 0, 1, 0, 0, 1, 2, 3) // fenced, but not moved
	// More checks within the backoff try nothing.
	for range 3 {
		h.c.expireSessions(context.Background())
	}
	fences := spantest.Named(rec, "Controller.fenceBrokers")
	if len(fences) != 1 || fences[0].Status().Code != codes.Error {
		t.Fatalf("%d fenceBrokers spans, want one, failed", len(fences))
	}
	if n := len(spantest.Named(rec, "Controller.retryMoveAway")); n != 0 {
		t.Fatalf("%d retryMoveAway spans within the backoff, want 0", n)
	}

	st.fail.Store(false)
	h.heartbeat(2, 3)
	h.clk.Advance(time.Second) // past the first backoff (one check interval)
	h.heartbeat(2, 3)
	h.c.expireSessions(context.Background())
	p := wantPartition(t, h, "t", 0, 2, 1, 1, 2, 3)
	retries := spantest.Named(rec, "Controller.retryMoveAway")
	if len(retries) != 1 {
		t.Fatalf("%d Controller.retryMoveAway spans, want 1", len(retries))
	}
	if r := retries[0]; r.Parent().IsValid() || r.Status().Code == codes.Error {
		t.Fatalf("retryMoveAway: parent %s status %v, want a root that succeeded", r.Parent().SpanID(), r.Status())
	}
	for _, id := range []int32{2, 3} {
		wantSentUnder(t, h, rec, id, p, retries[0])
	}
}
