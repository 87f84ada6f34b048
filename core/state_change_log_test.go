package core

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/replicad/replicad/internal/syncbuf"
)

// logBuffer collects JSON log lines; safe for concurrent writers.
type logBuffer struct{ syncbuf.Buffer }

// take returns the state-change lines written since the last take.
func (b *logBuffer) take(t *testing.T) []map[string]any {
	t.Helper()
	data := b.Take()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(data), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["logger"] == "state.change" {
			out = append(out, m)
		}
	}
	return out
}

// find returns the lines with message msg (and, when set, topic and partition).
func find(lines []map[string]any, msg string, topic string, partition int) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["message"] != msg {
			continue
		}
		if topic != "" && (l["topic"] != topic || l["partition"] != float64(partition)) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// wantLine checks that exactly one line has msg (for topic-partition when
// topic is set), at level, with the given fields, and returns it.
func wantLine(t *testing.T, lines []map[string]any, level, msg, topic string, partition int, fields map[string]any) map[string]any {
	t.Helper()
	got := find(lines, msg, topic, partition)
	if len(got) != 1 {
		t.Fatalf("%d lines %q for %s-%d, want 1; lines:\n%s", len(got), msg, topic, partition, dump(lines))
	}
	l := got[0]
	if l["level"] != level {
		t.Errorf("%q at level %v, want %s", msg, l["level"], level)
	}
	for k, want := range fields {
		if fmt.Sprint(l[k]) != fmt.Sprint(want) {
			t.Errorf("%q: %s = %v, want %v", msg, k, l[k], want)
		}
	}
	return l
}

func dump(lines []map[string]any) string {
	var sb strings.Builder
	for _, l := range lines {
		b, _ := json.Marshal(l)
		sb.Write(b)
		sb.WriteByte('\n')
	}
	return sb.String()
}

// TestStateChangeLog checks the logger=state.change lines of LeaderAndIsr
// requests at the seed's points and levels, with stable fields: the request
// handled (info) and each partition received, transitioned, its fetchers
// stopped and started, completed (trace); a stale leader epoch ignored at
// warn, the same epoch at debug; a leader that already leads at info.
func TestStateChangeLog(t *testing.T) {
	out := &logBuffer{}
	provider := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	h := newHarness(t, 1, func(c *Config) { c.Logger = zerolog.New(out).Level(zerolog.TraceLevel) })

	ctx, span := provider.Tracer("controller").Start(context.Background(), "Controller.electLeader")
	traceID := span.SpanContext().TraceID().String()
	h.rm.BecomeLeaderOrFollower(ctx, LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 5,
		PartitionStates: []PartitionState{
			state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}),
			state("orders", 1, 2, 3, []int32{1, 2}, []int32{1, 2}),
		},
		LiveLeaders: []Broker{{ID: 2, Host: "127.0.0.1", Port: 9092}}})
	span.End()
	lines := out.take(t)
	request := map[string]any{"controller_id": 100, "controller_epoch": 5, "trace_id": traceID, "broker": 1}
	with := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range request {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	wantLine(t, lines, "info", "Handling LeaderAndIsr request", "", 0, with(map[string]any{"partitions": 2}))
	leader := map[string]any{"leader": 1, "leader_epoch": 1, "isr": []any{1, 2}}
	follower := map[string]any{"leader": 2, "leader_epoch": 3, "isr": []any{1, 2}}
	wantLine(t, lines, "trace", "Received LeaderAndIsr request", "orders", 0, with(leader))
	wantLine(t, lines, "trace", "Received LeaderAndIsr request", "orders", 1, with(follower))
	for _, msg := range []string{
		"Handling LeaderAndIsr request: starting the become-leader transition",
		"Stopped fetchers as part of become-leader request",
		"Completed LeaderAndIsr request for the become-leader transition",
	} {
		wantLine(t, lines, "trace", msg, "orders", 0, with(leader))
	}
	for _, msg := range []string{
		"Handling LeaderAndIsr request: starting the become-follower transition",
		"Stopped fetchers as part of become-follower request",
		"Started fetcher to new leader as part of become-follower request",
		"Completed LeaderAndIsr request for the become-follower transition",
	} {
		wantLine(t, lines, "trace", msg, "orders", 1, with(follower))
	}
	wantLine(t, lines, "info", "Completed LeaderAndIsr request", "", 0, with(map[string]any{"became_leader": 1, "became_follower": 1, "partition_errors": 0}))
	// Nothing about a partition crosses over to the other's transition.
	if got := find(lines, "Stopped fetchers as part of become-leader request", "orders", 1); len(got) != 0 {
		t.Errorf("the follower logged a become-leader step: %v", got)
	}

	// A stale leader epoch: warn; the same epoch again: debug.
	h.leaderAndIsr(5, state("orders", 0, 1, 0, []int32{1, 2}, []int32{1, 2}))
	wantLine(t, out.take(t), "warn", "Ignoring LeaderAndIsr request: its leader epoch is smaller than the current leader epoch", "orders", 0,
		map[string]any{"leader_epoch": 0, "current_leader_epoch": 1, "controller_epoch": 5})
	h.leaderAndIsr(5, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	wantLine(t, out.take(t), "debug", "Ignoring LeaderAndIsr request: its leader epoch matches the current leader epoch", "orders", 0,
		map[string]any{"leader_epoch": 1, "current_leader_epoch": 1})
	// A newer epoch for a partition this broker already leads: info.
	h.leaderAndIsr(5, state("orders", 0, 1, 2, []int32{1, 2}, []int32{1, 2}))
	wantLine(t, out.take(t), "info", "Skipped the become-leader state change after marking its partition as leader: already the leader", "orders", 0,
		map[string]any{"leader_epoch": 2})
	// A stale controller epoch: warn, naming the request.
	h.leaderAndIsr(4, state("orders", 0, 1, 3, []int32{1, 2}, []int32{1, 2}))
	wantLine(t, out.take(t), "warn", "Ignoring LeaderAndIsr request since its controller epoch is old", "", 0,
		map[string]any{"request": "LeaderAndIsr", "controller_epoch": 4, "current_controller_epoch": 5})
}

// TestStateChangeLogAtInfo checks that at the default info level a request
// logs its summary lines only: the per-partition lines are trace.
func TestStateChangeLogAtInfo(t *testing.T) {
	out := &logBuffer{}
	h := newHarness(t, 1, func(c *Config) { c.Logger = zerolog.New(out).Level(zerolog.InfoLevel) })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}), state("orders", 1, 1, 1, []int32{1}, []int32{1}))
	var msgs []string
	for _, l := range out.take(t) {
		msgs = append(msgs, l["message"].(string))
	}
	if want := []string{"Handling LeaderAndIsr request", "Completed LeaderAndIsr request"}; !slices.Equal(msgs, want) {
		t.Errorf("state-change lines at info: %q, want %q", msgs, want)
	}
}

// Config.StateChangeLevel sets the state-change logger's level apart from
// the broker's: its per-partition trace lines on with the broker at warn,
// and its summaries off with the broker at trace.
func TestStateChangeLevelApartFromTheBroker(t *testing.T) {
	logAll := func(t *testing.T, broker, stateChange zerolog.Level) (lines []map[string]any, other int) {
		t.Helper()
		out := &logBuffer{}
		h := newHarness(t, 1, func(c *Config) {
			c.Logger = zerolog.New(out).Level(broker)
			c.StateChangeLevel = &stateChange
		})
		h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line != "" && !strings.Contains(line, `"logger":"state.change"`) {
				var m map[string]any
				if json.Unmarshal([]byte(line), &m) == nil {
					if lvl, _ := zerolog.ParseLevel(fmt.Sprint(m["level"])); lvl < broker {
						t.Errorf("a broker line below the broker's level %v: %s", broker, line)
					}
				}
				other++
			}
		}
		return out.take(t), other
	}
	lines, _ := logAll(t, zerolog.WarnLevel, zerolog.TraceLevel)
	wantLine(t, lines, "trace", "Handling LeaderAndIsr request: starting the become-leader transition", "orders", 0, nil)
	wantLine(t, lines, "info", "Completed LeaderAndIsr request", "", 0, nil)

	lines, other := logAll(t, zerolog.TraceLevel, zerolog.WarnLevel)
	if len(lines) != 0 {
		t.Errorf("state-change lines below warn: %s", dump(lines))
	}
	if other == 0 {
		t.Error("the broker at trace logged nothing else")
	}
}
