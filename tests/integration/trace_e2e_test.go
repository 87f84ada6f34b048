package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// traceDeadline bounds the wait for spans to reach Jaeger: the processes
// export every 100ms (OTEL_BSP_SCHEDULE_DELAY) and Jaeger batches for 200ms,
// so a second is plenty unless something is wrong.
const traceDeadline = 30 * time.Second

// TestElectionIsOneTraceInJaeger runs a real Jaeger, a controller and three
// brokers exporting spans to it, moves a partition's leadership with
// `ctlclient elect`, and requires Jaeger to hold ONE trace of it: the
// ctlclient root span, the controller's spans, and on every broker the
// LeaderAndIsr it was sent (becomeLeaderOrFollower), the new leader's
// Partition.makeLeader and the followers' Partition.makeFollower and
// FetcherManager.addFetcherForPartitions, with the partition's attributes.
// `ctlclient trace` then prints that trace from the same Jaeger.
func TestElectionIsOneTraceInJaeger(t *testing.T) {
	otlp, query := testutil.StartJaeger(t)
	// Whatever OTEL_* the shell running the test has, these processes export
	// to this Jaeger over OTLP/gRPC, every 100ms (not every 5s), with
	// replicad's own sampler (OTEL_TRACES_SAMPLER unset): what users run.
	env := []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp,
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + otlp,
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc",
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_TRACES_SAMPLER=",
		"OTEL_SDK_DISABLED=false",
		"OTEL_BSP_SCHEDULE_DELAY=100",
	}
	c := newCtlClusterEnv(t, 10*time.Second, env)
	const topic = "traced"
	c.createTopic(topic, 1, 3)
	for _, id := range clusterIDs {
		c.waitInIsr(topic, 0, id, 30*time.Second)
	}
	before, err := c.partitionState(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	oldLeader := before.GetLeader()
	newLeader := before.GetReplicas()[0]
	if newLeader == oldLeader {
		newLeader = before.GetReplicas()[1]
	}

	r := runCtlclientEnv(t, env, "--controller", c.ctlAddr, "elect", "--topic", topic, "--partition", "0",
		"--leader", strconv.Itoa(int(newLeader))).want(t, 0)
	t.Logf("ctlclient elect:\n%s", r.stdout)
	after := c.waitNewLeader(topic, 0, oldLeader, 30*time.Second)
	if after.GetLeader() != newLeader {
		t.Fatalf("leader %d after electing %d", after.GetLeader(), newLeader)
	}
	epoch := strconv.Itoa(int(after.GetLeaderEpoch()))
	var followers []int32
	for _, id := range after.GetReplicas() {
		if id != newLeader {
			followers = append(followers, id)
		}
	}

	jq := &jaegerQuery{t: t, base: query}
	// The elect trace: the only trace with a `ctlclient elect` span.
	var traceID string
	testutil.Eventually(t, traceDeadline, func() error {
		traces, err := jq.search(url.Values{"service": {"ctlclient"}, "operation": {"ctlclient elect"}})
		if err != nil {
			return err
		}
		if len(traces) != 1 {
			return fmt.Errorf("%d traces with a ctlclient elect span, want 1", len(traces))
		}
		traceID = traces[0].TraceID
		return nil
	})

	want := []spanWant{
		{service: "ctlclient", op: "ctlclient elect"},
		{service: "replicad-controller", op: "Controller.electLeader",
			attrs: map[string]string{"replicad.topic": topic, "replicad.partition": "0", "replicad.leader_epoch": epoch}},
		{service: "replicad", instance: itoa(int(newLeader)), op: "Partition.makeLeader",
			attrs: map[string]string{"replicad.topic": topic, "replicad.partition": "0", "replicad.leader_epoch": epoch}},
	}
	for _, id := range after.GetReplicas() {
		want = append(want, spanWant{service: "replicad", instance: itoa(int(id)), op: "ReplicaManager.becomeLeaderOrFollower"})
	}
	for _, id := range followers {
		want = append(want,
			spanWant{service: "replicad", instance: itoa(int(id)), op: "Partition.makeFollower",
				attrs: map[string]string{"replicad.topic": topic, "replicad.partition": "0", "replicad.leader_epoch": epoch}},
			spanWant{service: "replicad", instance: itoa(int(id)), op: "FetcherManager.addFetcherForPartitions"})
	}

	var last *jaegerTraceJSON
	deadline := time.Now().Add(traceDeadline)
	for {
		tr, err := jq.trace(traceID)
		var missing []string
		if err == nil {
			last = tr
			for _, w := range want {
				if !w.foundIn(tr) {
					missing = append(missing, w.String())
				}
			}
			if len(missing) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("trace %s: %v", traceID, err)
			}
			t.Fatalf("trace %s of the election lacks, after %v:\n  %s\nit holds:\n%s%s", traceID, traceDeadline,
				strings.Join(missing, "\n  "), describeSpans(last), jq.elsewhere(traceID, missing))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(last.Spans); n < len(want) {
		t.Fatalf("trace has %d spans, want at least %d", n, len(want))
	}

	// ctlclient trace shows it from the terminal: by id, and as the newest
	// ctlclient trace (its own traces, exported too, are passed over).
	shown := runCtlclientEnv(t, env, "trace", traceID, "--jaeger", query).want(t, 0)
	t.Logf("ctlclient trace %s:\n%s", traceID, shown.stdout)
	if !strings.HasPrefix(shown.stdout, "trace "+traceID+":") {
		t.Fatalf("ctlclient trace header:\n%s", shown.stdout)
	}
	for _, w := range want {
		if !strings.Contains(shown.stdout, w.op) {
			t.Errorf("ctlclient trace does not show %s", w.op)
		}
	}
	for _, id := range after.GetReplicas() {
		if !strings.Contains(shown.stdout, "[replicad "+itoa(int(id))+"]") {
			t.Errorf("ctlclient trace does not name broker %d as [replicad %d]", id, id)
		}
	}
	if !strings.Contains(shown.stdout, "topic="+topic+" partition=0 leader="+itoa(int(newLeader))+" leader_epoch="+epoch) {
		t.Errorf("ctlclient trace does not show topic=%s partition=0 leader=%d leader_epoch=%s", topic, newLeader, epoch)
	}
	lastShown := runCtlclientEnv(t, env, "trace", "last", "--jaeger", query).want(t, 0)
	if got := firstLine(lastShown.stdout); got != firstLine(shown.stdout) {
		t.Fatalf("trace last shows %q, want the election's %q", got, firstLine(shown.stdout))
	}
	raw := runCtlclientEnv(t, nil, "trace", traceID, "--jaeger", query, "-o", "json").want(t, 0)
	var resp struct {
		Data []jaegerTraceJSON `json:"data"`
	}
	if err := json.Unmarshal([]byte(raw.stdout), &resp); err != nil || len(resp.Data) != 1 || resp.Data[0].TraceID != traceID {
		t.Fatalf("trace -o json: %v\n%s", err, raw.stdout)
	}
	runCtlclientEnv(t, nil, "trace", "0123456789abcdef0123456789abcdef", "--jaeger", query).want(t, 1)

	// A controlled shutdown is one trace too: SIGTERM on the new leader
	// asks the controller to move its leadership; the broker's span, the
	// controller's and the LeaderAndIsr on the broker that takes over are
	// in it.
	b, _ := c.broker(newLeader)
	if code := b.Terminate(60 * time.Second); code != 0 {
		t.Fatalf("broker %d exited %d after SIGTERM", newLeader, code)
	}
	moved, err := c.partitionState(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if moved.GetLeader() == newLeader || moved.GetLeader() < 0 {
		t.Fatalf("leader %d after the controlled shutdown of %d", moved.GetLeader(), newLeader)
	}
	var shutdownTrace string
	testutil.Eventually(t, traceDeadline, func() error {
		traces, err := jq.search(url.Values{"service": {"replicad"}, "operation": {"Broker.controlledShutdown"}})
		if err != nil {
			return err
		}
		if len(traces) != 1 {
			return fmt.Errorf("%d traces with a Broker.controlledShutdown span, want 1", len(traces))
		}
		shutdownTrace = traces[0].TraceID
		return nil
	})
	shutdownWant := []spanWant{
		{service: "replicad", instance: itoa(int(newLeader)), op: "Broker.controlledShutdown"},
		{service: "replicad-controller", op: "Controller.controlledShutdown"},
		{service: "replicad", instance: itoa(int(moved.GetLeader())), op: "Partition.makeLeader",
			attrs: map[string]string{"replicad.topic": topic, "replicad.partition": "0",
				"replicad.leader_epoch": strconv.Itoa(int(moved.GetLeaderEpoch()))}},
	}
	testutil.Eventually(t, traceDeadline, func() error {
		tr, err := jq.trace(shutdownTrace)
		if err != nil {
			return err
		}
		for _, w := range shutdownWant {
			if !w.foundIn(tr) {
				return fmt.Errorf("the controlled shutdown's trace %s lacks %s; it holds:\n%s", shutdownTrace, w, describeSpans(tr))
			}
		}
		return nil
	})

	// Heartbeats (every few seconds from every broker since the start) make
	// no spans on either side: Jaeger holds state changes, not the beat of
	// a healthy cluster.
	for _, service := range []string{"replicad", "replicad-controller"} {
		ops, err := jq.operations(service)
		if err != nil {
			t.Fatal(err)
		}
		if len(ops) == 0 {
			t.Fatalf("Jaeger knows no operations of %s", service)
		}
		for _, op := range ops {
			if strings.Contains(op, "BrokerHeartbeat") || strings.Contains(op, "grpc.health") {
				t.Errorf("%s made %q spans", service, op)
			}
		}
	}
}

// operations lists the span names Jaeger has seen from service.
func (j *jaegerQuery) operations(service string) ([]string, error) {
	var body struct {
		Data []string `json:"data"`
	}
	err := j.getJSON("/api/services/"+url.PathEscape(service)+"/operations", nil, &body)
	return body.Data, err
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// spanWant is a span the trace must hold: service, instance (when set),
// operation, and attributes with these values.
type spanWant struct {
	service, instance, op string
	attrs                 map[string]string
}

func (w spanWant) String() string {
	s := w.op + " on " + w.service
	if w.instance != "" {
		s += " " + w.instance
	}
	if len(w.attrs) > 0 {
		keys := make([]string, 0, len(w.attrs))
		for k := range w.attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			s += " " + k + "=" + w.attrs[k]
		}
	}
	return s
}

func (w spanWant) foundIn(tr *jaegerTraceJSON) bool {
	for _, s := range tr.Spans {
		p := tr.Processes[s.ProcessID]
		if s.OperationName != w.op || p.ServiceName != w.service {
			continue
		}
		if w.instance != "" && tagOf(p.Tags, "service.instance.id") != w.instance {
			continue
		}
		ok := true
		for k, v := range w.attrs {
			if tagOf(s.Tags, k) != v {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// The parts of Jaeger's /api/traces JSON the test reads.
type (
	jaegerTraceJSON struct {
		TraceID   string           `json:"traceID"`
		Spans     []jaegerSpanJSON `json:"spans"`
		Processes map[string]struct {
			ServiceName string          `json:"serviceName"`
			Tags        []jaegerTagJSON `json:"tags"`
		} `json:"processes"`
	}
	jaegerSpanJSON struct {
		TraceID       string          `json:"traceID"`
		SpanID        string          `json:"spanID"`
		OperationName string          `json:"operationName"`
		Tags          []jaegerTagJSON `json:"tags"`
		ProcessID     string          `json:"processID"`
	}
	jaegerTagJSON struct {
		Key   string          `json:"key"`
		Value json.RawMessage `json:"value"`
	}
)

func tagOf(tags []jaegerTagJSON, key string) string {
	for _, t := range tags {
		if t.Key == key {
			var s string
			if json.Unmarshal(t.Value, &s) == nil {
				return s
			}
			return string(t.Value)
		}
	}
	return ""
}

func describeSpans(tr *jaegerTraceJSON) string {
	if tr == nil {
		return "  (nothing)\n"
	}
	var b strings.Builder
	for _, s := range tr.Spans {
		p := tr.Processes[s.ProcessID]
		fmt.Fprintf(&b, "  %s on %s %s\n", s.OperationName, p.ServiceName, tagOf(p.Tags, "service.instance.id"))
	}
	return b.String()
}

// jaegerQuery asks the query HTTP API.
type jaegerQuery struct {
	t    *testing.T
	base string
}

func (j *jaegerQuery) get(path string, q url.Values) ([]jaegerTraceJSON, error) {
	var body struct {
		Data []jaegerTraceJSON `json:"data"`
	}
	if err := j.getJSON(path, q, &body); err != nil {
		return nil, err
	}
	return body.Data, nil
}

// getJSON GETs path?q from the query API and decodes the answer into out.
func (j *jaegerQuery) getJSON(path string, q url.Values, out any) error {
	u := j.base + path
	if q != nil {
		u += "?" + q.Encode()
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

func (j *jaegerQuery) search(q url.Values) ([]jaegerTraceJSON, error) {
	q.Set("limit", "100")
	q.Set("start", strconv.FormatInt(time.Now().Add(-time.Hour).UnixMicro(), 10))
	return j.get("/api/traces", q)
}

func (j *jaegerQuery) trace(id string) (*jaegerTraceJSON, error) {
	data, err := j.get("/api/traces/"+id, nil)
	if err != nil {
		return nil, err
	}
	if len(data) != 1 {
		return nil, fmt.Errorf("trace %s: %d traces in the answer", id, len(data))
	}
	return &data[0], nil
}

// elsewhere says in which other traces the broker's spans of the election
// are, when they are not in the election's: trace context did not flow.
func (j *jaegerQuery) elsewhere(traceID string, missing []string) string {
	traces, err := j.search(url.Values{"service": {"replicad"}, "operation": {"ReplicaManager.becomeLeaderOrFollower"}})
	if err != nil {
		return "\n(could not search the brokers' traces: " + err.Error() + ")"
	}
	var b strings.Builder
	for _, tr := range traces {
		if tr.TraceID == traceID {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nthe brokers' LeaderAndIsr spans are in other traces (trace context did not reach them):\n")
		}
		fmt.Fprintf(&b, " trace %s:\n%s", tr.TraceID, describeSpans(&tr))
	}
	return b.String()
}
