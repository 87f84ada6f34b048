package core

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
	"github.com/replicad/replicad/internal/spantest"
)

// tracedHarness is newHarness with every span recorded in memory.
func tracedHarness(t *testing.T, mutate ...func(*Config)) (*harness, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	mutate = append([]func(*Config){func(c *Config) { c.Tracer = provider.Tracer("core-test") }}, mutate...)
	return newHarness(t, 1, mutate...), rec, provider.Tracer("caller")
}

// oneSpan is the only ended span called name.
func oneSpan(t *testing.T, rec *tracetest.SpanRecorder, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	spans := spantest.Named(rec, name)
	if len(spans) != 1 {
		t.Fatalf("%d %s spans, want 1", len(spans), name)
	}
	return spans[0]
}

func childrenOf(rec *tracetest.SpanRecorder, parent sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spantest.Named(rec, name) {
		if s.Parent().SpanID() == parent.SpanContext().SpanID() {
			out = append(out, s)
		}
	}
	return out
}

// wantAttrs checks attributes: an int64, string, bool or []int64 each.
func wantAttrs(t *testing.T, what string, kvs []attribute.KeyValue, want map[string]any) {
	t.Helper()
	got := spantest.Attrs(kvs)
	for key, w := range want {
		v, ok := got[key]
		if !ok {
			t.Errorf("%s: no %s", what, key)
			continue
		}
		var match bool
		switch w := w.(type) {
		case int:
			match = v.AsInt64() == int64(w)
		case string:
			match = v.AsString() == w
		case bool:
			match = v.AsBool() == w
		case []int64:
			match = slices.Equal(v.AsInt64Slice(), w)
		default:
			t.Fatalf("unsupported %T", w)
		}
		if !match {
			t.Errorf("%s: %s = %s, want %v", what, key, v.Emit(), w)
		}
	}
}

// TestLeaderAndIsrSpans checks the spans of a LeaderAndIsr: under the
// caller's span, ReplicaManager.becomeLeaderOrFollower, then makeLeaders and
// makeFollowers, each with one child span per partition transition carrying
// the SPEC's attributes (old and new leader epoch, leader, ISR, HW, LEO,
// error code, is-new-leader), and FetcherManager.addFetcherForPartitions,
// whose context reaches the fetcher manager. A stale partition is an event.
func TestLeaderAndIsrSpans(t *testing.T) {
	h, rec, caller := tracedHarness(t)
	ctx, parent := caller.Start(context.Background(), "controller")
	resp := h.rm.BecomeLeaderOrFollower(ctx, LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 3,
		PartitionStates: []PartitionState{
			state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}),
			state("orders", 1, 1, 1, []int32{1, 2}, []int32{1, 2}),
			state("orders", 2, 2, 4, []int32{1, 2}, []int32{2, 1}),
		},
		LiveLeaders: []Broker{{ID: 2, Host: "127.0.0.1", Port: 9092}}})
	parent.End()
	for _, pe := range resp.PartitionErrors {
		if pe.Error != ErrNone {
			t.Fatalf("LeaderAndIsr: %+v", resp)
		}
	}

	bl := oneSpan(t, rec, "ReplicaManager.becomeLeaderOrFollower")
	if bl.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("becomeLeaderOrFollower parent %s, want the caller's", bl.Parent().SpanID())
	}
	wantAttrs(t, "becomeLeaderOrFollower", bl.Attributes(), map[string]any{"replicad.controller_id": 100, "replicad.controller_epoch": 3,
		"replicad.partitions": 3, "replicad.became_leader": 2, "replicad.became_follower": 1, "replicad.error_code": "NONE"})

	ml := oneSpan(t, rec, "ReplicaManager.makeLeaders")
	mf := oneSpan(t, rec, "ReplicaManager.makeFollowers")
	for _, s := range []sdktrace.ReadOnlySpan{ml, mf} {
		if s.Parent().SpanID() != bl.SpanContext().SpanID() {
			t.Errorf("%s is not a child of becomeLeaderOrFollower", s.Name())
		}
	}
	leaders := childrenOf(rec, ml, "Partition.makeLeader")
	if len(leaders) != 2 {
		t.Fatalf("%d Partition.makeLeader children of makeLeaders, want 2", len(leaders))
	}
	for _, s := range leaders {
		p := spantest.Attrs(s.Attributes())["replicad.partition"].AsInt64()
		wantAttrs(t, fmt.Sprintf("Partition.makeLeader orders-%d", p), s.Attributes(), map[string]any{
			"replicad.topic": "orders", "replicad.leader": 1, "replicad.old_leader": -1, "replicad.leader_epoch": 1,
			"replicad.old_leader_epoch": -1, "replicad.isr": []int64{1, 2}, "replicad.replicas": []int64{1, 2},
			"replicad.controller_epoch": 1, "replicad.is_new_leader": true, "replicad.high_watermark": 0,
			"replicad.log_end_offset": 0, "replicad.error_code": "NONE",
		})
	}
	followers := childrenOf(rec, mf, "Partition.makeFollower")
	if len(followers) != 1 {
		t.Fatalf("%d Partition.makeFollower children of makeFollowers, want 1", len(followers))
	}
	wantAttrs(t, "Partition.makeFollower", followers[0].Attributes(), map[string]any{
		"replicad.topic": "orders", "replicad.partition": 2, "replicad.leader": 2, "replicad.leader_epoch": 4,
		"replicad.old_leader_epoch": -1, "replicad.changed": true, "replicad.log_end_offset": 0, "replicad.error_code": "NONE",
	})
	adds := childrenOf(rec, mf, "FetcherManager.addFetcherForPartitions")
	if len(adds) != 1 {
		t.Fatalf("%d addFetcherForPartitions children of makeFollowers, want 1", len(adds))
	}
	wantAttrs(t, "addFetcherForPartitions", adds[0].Attributes(), map[string]any{
		"replicad.partitions": 1, "replicad.topic": "orders", "replicad.partition": 2, "replicad.leader": 2, "replicad.fetch_offset": 0,
	})
	h.fetchers.mu.Lock()
	addSpans := slices.Clone(h.fetchers.addSpans)
	h.fetchers.mu.Unlock()
	if len(addSpans) != 1 || !addSpans[0].Equal(adds[0].SpanContext()) {
		t.Errorf("fetcher manager called in %v, want the addFetcherForPartitions span %s", addSpans, adds[0].SpanContext().SpanID())
	}

	// An older leader epoch is ignored: an event of the request's span.
	h.rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 3,
		PartitionStates: []PartitionState{state("orders", 0, 1, 0, []int32{1, 2}, []int32{1, 2})}})
	bls := spantest.Named(rec, "ReplicaManager.becomeLeaderOrFollower")
	evs := bls[len(bls)-1].Events()
	if len(evs) != 1 || evs[0].Name != "LeaderAndIsr partition ignored" {
		t.Fatalf("stale request's events %v, want one LeaderAndIsr partition ignored", evs)
	}
	wantAttrs(t, "ignored partition", evs[0].Attributes, map[string]any{"replicad.topic": "orders", "replicad.partition": 0,
		"replicad.reason": "stale leader epoch", "replicad.error_code": "STALE_CONTROLLER_EPOCH", "replicad.leader_epoch": 0,
		"replicad.current_leader_epoch": 1})
}

// TestLeaderAndIsrSpanCap checks that a request of MaxPartitionSpans
// partitions gets a child span per transition, and a larger one none but
// events on makeLeaders instead: MaxPartitionEvents of them, then one
// summary of the rest.
func TestLeaderAndIsrSpanCap(t *testing.T) {
	h, rec, _ := tracedHarness(t)
	states := func(topic string, n int) []PartitionState {
		out := make([]PartitionState, n)
		for i := range out {
			out[i] = state(topic, int32(i), 1, 1, []int32{1}, []int32{1})
		}
		return out
	}
	h.leaderAndIsr(1, states("small", MaxPartitionSpans)...)
	ml := oneSpan(t, rec, "ReplicaManager.makeLeaders")
	if n := len(childrenOf(rec, ml, "Partition.makeLeader")); n != MaxPartitionSpans {
		t.Fatalf("%d Partition.makeLeader spans for %d partitions, want one each", n, MaxPartitionSpans)
	}
	if n := len(ml.Events()); n != 0 {
		t.Errorf("%d events on makeLeaders with child spans, want none", n)
	}

	const big = MaxPartitionEvents + 10
	h.leaderAndIsr(1, states("big", big)...)
	mls := spantest.Named(rec, "ReplicaManager.makeLeaders")
	if len(mls) != 2 {
		t.Fatalf("%d makeLeaders spans, want 2", len(mls))
	}
	ml = mls[1]
	if n := len(childrenOf(rec, ml, "Partition.makeLeader")); n != 0 {
		t.Fatalf("%d Partition.makeLeader spans for %d partitions, want none above the cap", n, big)
	}
	evs := ml.Events()
	if len(evs) != MaxPartitionEvents+1 {
		t.Fatalf("%d events for %d partitions, want %d itemised + 1 summary", len(evs), big, MaxPartitionEvents)
	}
	for _, ev := range evs[:MaxPartitionEvents] {
		if ev.Name != "Partition.makeLeader" {
			t.Fatalf("event %q, want Partition.makeLeader", ev.Name)
		}
		wantAttrs(t, "makeLeader event", ev.Attributes, map[string]any{"replicad.topic": "big", "replicad.leader_epoch": 1,
			"replicad.old_leader_epoch": -1, "replicad.is_new_leader": true, "replicad.error_code": "NONE", "replicad.high_watermark": 0})
	}
	summary := evs[MaxPartitionEvents]
	if summary.Name != "partitions not itemised" || spantest.Attrs(summary.Attributes)["replicad.partitions"].AsInt64() != big-MaxPartitionEvents {
		t.Errorf("last event %q %v, want the summary of %d partitions", summary.Name, summary.Attributes, big-MaxPartitionEvents)
	}

	// The same large request again: every partition is ignored, and only
	// MaxIgnoredEvents of them are itemised.
	h.leaderAndIsr(1, states("big", big)...)
	bls := spantest.Named(rec, "ReplicaManager.becomeLeaderOrFollower")
	evs = bls[len(bls)-1].Events()
	if len(evs) != MaxIgnoredEvents+1 || evs[0].Name != "LeaderAndIsr partition ignored" ||
		spantest.Attrs(evs[MaxIgnoredEvents].Attributes)["replicad.partitions"].AsInt64() != big-MaxIgnoredEvents {
		t.Errorf("repeated large request: %d events (first %q), want %d ignored + a summary of %d", len(evs), evs[0].Name, MaxIgnoredEvents, big-MaxIgnoredEvents)
	}
}

// TestIsrChangeSpans checks Partition.expandIsr and Partition.shrinkIsr on
// the leader: root spans from proposal to outcome, their context handed to
// the IsrChanger, with the old, proposed and committed ISR.
func TestIsrChangeSpans(t *testing.T) {
	t.Run("expand rejected", func(t *testing.T) {
		changer := &heldIsrChanger{}
		h, rec, _ := tracedHarness(t, func(c *Config) { c.IsrChanger = changer })
		h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1}))
		h.produce(tp0, AcksLeader, "a", "b")
		h.fetch(2, fetchAt(2, 1))
		got := changer.submitted()
		if len(got) != 1 || !got[0].SpanContext.IsValid() {
			t.Fatalf("submitted %+v, want one change carrying its span context", got)
		}
		if n := len(spantest.Named(rec, "Partition.expandIsr")); n != 0 {
			t.Fatalf("expandIsr span ended before the change completed")
		}
		changer.answer(0, IsrChangeResult{Error: ErrInvalidUpdateVersion})
		s := oneSpan(t, rec, "Partition.expandIsr")
		if s.Parent().IsValid() || !s.SpanContext().Equal(got[0].SpanContext) {
			t.Errorf("expandIsr span %s (parent %s), want the root span handed to the changer %s", s.SpanContext().SpanID(), s.Parent().SpanID(), got[0].SpanContext.SpanID())
		}
		wantAttrs(t, "expandIsr", s.Attributes(), map[string]any{"replicad.topic": "orders", "replicad.partition": 0,
			"replicad.leader": 1, "replicad.leader_epoch": 1, "replicad.old_isr": []int64{1}, "replicad.proposed_isr": []int64{1, 2},
			"replicad.replica": 2, "replicad.high_watermark": 2, "replicad.log_end_offset": 2,
			"replicad.error_code": "INVALID_UPDATE_VERSION", "replicad.superseded": false})
		if s.Status().Code != codes.Error {
			t.Errorf("rejected expandIsr status %v, want Error", s.Status())
		}
	})
	t.Run("shrink committed", func(t *testing.T) {
		h, rec, _ := tracedHarness(t, func(c *Config) { c.ReplicaLagTimeMax = 10 * time.Second })
		h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
		h.fetch(2, fetchAt(0, 1))
		h.produce(tp0, AcksLeader, "a")
		h.clock.Advance(15 * time.Second)
		s := oneSpan(t, rec, "Partition.shrinkIsr")
		wantAttrs(t, "shrinkIsr", s.Attributes(), map[string]any{"replicad.topic": "orders", "replicad.partition": 0,
			"replicad.old_isr": []int64{1, 2}, "replicad.proposed_isr": []int64{1}, "replicad.out_of_sync_replicas": []int64{2},
			"replicad.isr": []int64{1}, "replicad.partition_epoch": 1, "replicad.log_end_offset": 1, "replicad.error_code": "NONE"})
	})
}

// TestStopReplicaAndOfflineSpans checks ReplicaManager.stopReplicas (its
// controller epoch, an event per partition) and a log dir failure: a
// ReplicaManager.markPartitionOffline span per partition under it.
func TestStopReplicaAndOfflineSpans(t *testing.T) {
	h, rec, _ := tracedHarness(t)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}), state("orders", 1, 1, 1, []int32{1}, []int32{1}),
		state("gone", 0, 1, 1, []int32{1}, []int32{1}))
	h.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: 2,
		Partitions: []StopReplicaPartition{{TopicPartition: tp.TopicPartition{Topic: "gone"}, LeaderEpoch: 1, Delete: true}}})
	sr := oneSpan(t, rec, "ReplicaManager.stopReplicas")
	wantAttrs(t, "stopReplicas", sr.Attributes(), map[string]any{"replicad.controller_epoch": 2, "replicad.controller_id": 100,
		"replicad.partitions": 1, "replicad.error_code": "NONE"})
	if evs := sr.Events(); len(evs) != 1 || evs[0].Name != "StopReplica partition" {
		t.Errorf("stopReplicas events %v, want one StopReplica partition", evs)
	} else {
		wantAttrs(t, "StopReplica partition", evs[0].Attributes, map[string]any{"replicad.topic": "gone", "replicad.partition": 0,
			"replicad.delete": true, "replicad.error_code": "NONE"})
	}

	dir, _ := h.rm.logs.DirOf(tp0)
	h.rm.handleLogDirFailure(dir, errors.New("disk gone"))
	root := oneSpan(t, rec, "ReplicaManager.handleLogDirFailure")
	if root.Parent().IsValid() || root.Status().Code != codes.Error {
		t.Errorf("handleLogDirFailure: parent %s status %v, want a failed root", root.Parent().SpanID(), root.Status())
	}
	var offline []int64
	for _, s := range childrenOf(rec, root, "ReplicaManager.markPartitionOffline") {
		a := spantest.Attrs(s.Attributes())
		if a["replicad.topic"].AsString() != "orders" {
			t.Errorf("markPartitionOffline of topic %q", a["replicad.topic"].AsString())
		}
		offline = append(offline, a["replicad.partition"].AsInt64())
	}
	slices.Sort(offline)
	if !slices.Equal(offline, []int64{0, 1}) {
		t.Errorf("markPartitionOffline spans for partitions %v, want [0 1]", offline)
	}
}

// The periodic HW checkpoint makes no span (a root trace every few seconds
// would bury the state changes); a checkpoint asked for is traced.
func TestOnlyRequestedCheckpointsAreTraced(t *testing.T) {
	h, rec, _ := tracedHarness(t)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	h.produce(tp0, AcksLeader, "a")
	path := filepath.Join(h.dirs[0], logmgr.ReplicationOffsetCheckpoint)
	h.clock.Advance(5 * time.Second)
	if hws, err := checkpoint.ReadOffsets(vfs.OS, path); err != nil || hws[tp0] != 1 {
		t.Fatalf("periodic checkpoint %v %v, want orders-0 at 1", hws, err)
	}
	if n := len(spantest.Named(rec, "ReplicaManager.checkpointHighWatermarks")); n != 0 {
		t.Fatalf("%d checkpointHighWatermarks spans from the periodic checkpoint, want 0", n)
	}
	h.rm.CheckpointHighWatermarks(context.Background())
	s := oneSpan(t, rec, "ReplicaManager.checkpointHighWatermarks")
	wantAttrs(t, "checkpointHighWatermarks", s.Attributes(), map[string]any{"replicad.log_dirs": 1, "replicad.failed_log_dirs": 0})
}
