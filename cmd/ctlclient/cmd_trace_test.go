package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// sampleTraceID is the trace in testdata/jaeger_elect_trace.json: Jaeger
// v1.76.0's GET /api/traces/{id} answer, recorded, for `ctlclient elect`
// moving orders-0 from broker 1 to broker 2 through the controller, with two
// spans added by hand: a fetcher span linked (FOLLOWS_FROM) to broker 3's
// LeaderAndIsr, and a failed span with an exception event whose parent
// never reached Jaeger. testdata/jaeger_elect_trace.timeline is what
// `ctlclient trace` prints of it.
const sampleTraceID = "45b1ed1d44425c586a5da4aec574d240"

// fakeJaeger serves Jaeger's query API: /api/traces/{id} from traces (404
// with Jaeger's error body otherwise) and /api/traces?service= from search.
type fakeJaeger struct {
	traces map[string][]byte // trace id -> body
	search []byte            // body of every search

	mu       sync.Mutex
	searches []map[string]string // query of each search
}

func (f *fakeJaeger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if id, ok := strings.CutPrefix(r.URL.Path, "/api/traces/"); ok {
		body, found := f.traces[id]
		if !found {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":404,"msg":"trace not found"}]}` + "\n"))
			return
		}
		w.Write(body)
		return
	}
	if r.URL.Path == "/api/traces" {
		q := map[string]string{}
		for k := range r.URL.Query() {
			q[k] = r.URL.Query().Get(k)
		}
		f.mu.Lock()
		f.searches = append(f.searches, q)
		f.mu.Unlock()
		if q["service"] == "" {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte(`{"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":400,"msg":"parameter 'service' is required"}]}`))
			return
		}
		w.Write(f.search)
		return
	}
	http.NotFound(w, r)
}

func startFakeJaeger(t *testing.T, f *fakeJaeger) string {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv.URL
}

func sampleTrace(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/jaeger_elect_trace.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTraceTimeline ensures a trace prints one line per span, indented under
// its parent, children by start time, with service and instance, offsets
// and durations in ms, the replicad.* attributes and errors, links, and
// spans whose parent is missing at depth 0.
func TestTraceTimeline(t *testing.T) {
	t.Setenv("COLUMNS", "") // whole lines, whatever the terminal running the tests
	url := startFakeJaeger(t, &fakeJaeger{traces: map[string][]byte{sampleTraceID: sampleTrace(t)}})
	r := ctl(t, "", "", "trace", sampleTraceID, "--jaeger", url)
	wantCode(t, r, 0)
	want, err := os.ReadFile("testdata/jaeger_elect_trace.timeline")
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != string(want) {
		t.Fatalf("timeline:\n%s\nwant (testdata/jaeger_elect_trace.timeline):\n%s", r.stdout, want)
	}

	// The same, spelled out for the lines that matter: the new leader's
	// makeLeader nine levels under the ctlclient span, and the spans
	// without a parent in the trace at depth 0, by start time.
	got := lines(r.stdout)
	if got[0] != "trace 45b1ed1d44425c586a5da4aec574d240: 35 spans from 5 processes, 231.500ms, started 2026-11-29T11:25:24.149497Z" {
		t.Errorf("header %q", got[0])
	}
	for _, w := range []string{
		"    0.000ms   227.510ms  ctlclient elect  [ctlclient vm/31697]  broker_address=127.0.0.1:9091 controller_address=127.0.0.1:39090",
		"   34.134ms     0.103ms  " + strings.Repeat("  ", 9) + "Partition.makeLeader  [replicad 2]  topic=orders partition=0 leader=2 leader_epoch=1 old_leader=1 old_leader_epoch=0 isr=[1,2,3] error_code=NONE ",
		"   60.000ms     0.300ms  ReplicaFetcher.start  [replicad 3]  leader=2 fetcher_id=0  (follows from ReplicaManager.becomeLeaderOrFollower [replicad 3])",
		"  230.000ms     1.500ms  ReplicaManager.checkpointHighWatermarks  [replicad 3]  error=\"write /data/broker-3/replication-offset-checkpoint.tmp: no space left on device\"  (1 event)  (parent 0000000000000bad not in the trace)",
	} {
		if !slices.ContainsFunc(got, func(l string) bool { return strings.HasPrefix(l, w) }) {
			t.Errorf("no line starting %q", w)
		}
	}

	// --events prints the events under their span instead of counting them.
	r = ctl(t, "", "", "trace", sampleTraceID, "--events", "--jaeger", url)
	wantCode(t, r, 0)
	for _, w := range []string{
		"   48.267ms              " + strings.Repeat("  ", 10) + "· fetcher added partition  topic=orders partition=0 leader=2 leader_epoch=1 fetch_offset=7 fetcher_id=0\n",
		"  231.000ms                · exception  exception.message=\"no space left on device\" exception.type=*fs.PathError\n",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("--events: no line %q in\n%s", w, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "(1 event)") {
		t.Errorf("--events still counts events:\n%s", r.stdout)
	}
}

// TestTraceJSONIsJaegersAnswer ensures -o json prints Jaeger's body unchanged.
func TestTraceJSONIsJaegersAnswer(t *testing.T) {
	body := sampleTrace(t)
	url := startFakeJaeger(t, &fakeJaeger{traces: map[string][]byte{sampleTraceID: body}})
	r := ctl(t, "", "", "trace", "-o", "json", strings.ToUpper(sampleTraceID), "--jaeger", url)
	wantCode(t, r, 0)
	if strings.TrimSuffix(r.stdout, "\n") != strings.TrimSuffix(string(body), "\n") {
		t.Fatalf("-o json is not Jaeger's answer:\n%.300s", r.stdout)
	}
}

// searchBody is a /api/traces search answer holding traces with one span
// each, of (trace id, service, operation, start µs).
func searchBody(t *testing.T, spans ...[4]string) []byte {
	t.Helper()
	type span struct {
		TraceID       string `json:"traceID"`
		SpanID        string `json:"spanID"`
		OperationName string `json:"operationName"`
		StartTime     int64  `json:"startTime"`
		Duration      int64  `json:"duration"`
		ProcessID     string `json:"processID"`
	}
	type proc struct {
		ServiceName string `json:"serviceName"`
	}
	type tr struct {
		TraceID   string          `json:"traceID"`
		Spans     []span          `json:"spans"`
		Processes map[string]proc `json:"processes"`
	}
	var data []tr
	for _, s := range spans {
		start, _ := strconv.ParseInt(s[3], 10, 64)
		data = append(data, tr{TraceID: s[0], Spans: []span{{TraceID: s[0], SpanID: "0000000000000001", OperationName: s[2], StartTime: start, Duration: 10, ProcessID: "p1"}},
			Processes: map[string]proc{"p1": {ServiceName: s[1]}}})
	}
	b, err := json.Marshal(map[string]any{"data": data, "total": 0, "limit": 0, "offset": 0, "errors": nil})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTraceLast ensures `last` asks for the traces of --service (and
// --operation) within --lookback and shows the newest, passing over
// `ctlclient trace` runs.
func TestTraceLast(t *testing.T) {
	now := time.Now().UnixMicro()
	f := &fakeJaeger{
		traces: map[string][]byte{sampleTraceID: sampleTrace(t)},
		search: searchBody(t,
			[4]string{"00000000000000000000000000000001", "ctlclient", "ctlclient describe", strconv.FormatInt(now-9e6, 10)},
			[4]string{"ffffffffffffffffffffffffffffffff", "ctlclient", "ctlclient trace", strconv.FormatInt(now-1e6, 10)},
			[4]string{sampleTraceID, "ctlclient", "ctlclient elect", strconv.FormatInt(now-5e6, 10)},
			[4]string{"00000000000000000000000000000002", "ctlclient", "ctlclient create-topic", strconv.FormatInt(now-7e6, 10)}),
	}
	url := startFakeJaeger(t, f)
	r := ctl(t, "", "", "trace", "last", "--jaeger", url+"/")
	wantCode(t, r, 0)
	if !strings.HasPrefix(r.stdout, "trace "+sampleTraceID+": ") {
		t.Fatalf("trace last printed:\n%s", r.stdout)
	}
	r = ctl(t, "", "", "trace", "last", "--service", "replicad-controller", "--operation", "Controller.fenceBrokers",
		"--lookback", "10m", "--limit", "5", "--jaeger", url)
	wantCode(t, r, 0)

	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.searches) != 2 {
		t.Fatalf("%d searches", len(f.searches))
	}
	q := f.searches[0]
	start, _ := strconv.ParseInt(q["start"], 10, 64)
	if q["service"] != "ctlclient" || q["operation"] != "" || q["limit"] != strconv.Itoa(20+selfTraceMargin) || start > now-int64(time.Hour/time.Microsecond)+60e6 || q["end"] == "" {
		t.Fatalf("default search %v", q)
	}
	q = f.searches[1]
	start, _ = strconv.ParseInt(q["start"], 10, 64)
	if q["service"] != "replicad-controller" || q["operation"] != "Controller.fenceBrokers" || q["limit"] != "5" || start < now-int64(11*time.Minute/time.Microsecond) {
		t.Fatalf("search %v", q)
	}
}

// TestTraceJaegerFromEnv ensures CTLCLIENT_JAEGER is the default of --jaeger.
func TestTraceJaegerFromEnv(t *testing.T) {
	url := startFakeJaeger(t, &fakeJaeger{traces: map[string][]byte{sampleTraceID: sampleTrace(t)}})
	t.Setenv("CTLCLIENT_JAEGER", url)
	wantCode(t, ctl(t, "", "", "trace", sampleTraceID), 0)
}

// TestTraceErrors ensures an unreachable Jaeger, an unknown trace and no
// trace to show exit 1 saying so, and bad arguments exit 2.
func TestTraceErrors(t *testing.T) {
	f := &fakeJaeger{traces: map[string][]byte{
		"00000000000000000000000000000abc": []byte(`{"data":[],"total":0,"limit":0,"offset":0,"errors":null}`),
	}, search: []byte(`{"data":[],"total":0,"limit":0,"offset":0,"errors":null}`)}
	url := startFakeJaeger(t, f)
	html := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<html>not jaeger</html>"))
	}))
	defer html.Close()
	// A 502 in Jaeger's JSON shape but with no error message (a proxy).
	bare := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte(`{"data":null,"upstream":"down"}`))
	}))
	defer bare.Close()

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"trace", sampleTraceID, "--jaeger", "http://" + deadAddr(t)}, 1, "unreachable"},
		{[]string{"trace", sampleTraceID, "--jaeger", url}, 1, "trace " + sampleTraceID + " not found in Jaeger at " + url},
		{[]string{"trace", "abc", "--jaeger", url}, 1, "trace abc not found"},
		{[]string{"trace", "last", "--jaeger", url}, 1, "no trace of service ctlclient in the last 1h0m0s"},
		{[]string{"trace", sampleTraceID, "--jaeger", html.URL}, 1, "not Jaeger's JSON"},
		{[]string{"trace", sampleTraceID, "--jaeger", bare.URL}, 1, `HTTP 502: {"data":null,"upstream":"down"}`},
		{[]string{"trace", "last", "--jaeger", bare.URL}, 1, `HTTP 502: {"data":null,"upstream":"down"}`},
		{[]string{"trace"}, 2, "want last or a TRACE_ID"},
		{[]string{"trace", "first"}, 2, `"first" is neither last nor a trace id`},
		{[]string{"trace", "last", sampleTraceID}, 2, "want one of last or a TRACE_ID"},
		{[]string{"trace", "last", "--jaeger", "ftp://x"}, 2, "--jaeger: want an http URL"},
		{[]string{"trace", "last", "-o", "yaml"}, 2, "-o: want table or json"},
		{[]string{"trace", "last", "--lookback", "0s"}, 2, "--lookback must be positive"},
		{[]string{"trace", "last", "--bogus"}, 2, "flag provided but not defined: -bogus"},
	} {
		r := ctl(t, "", "", c.args...)
		wantCode(t, r, c.code)
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: stderr %q, want %q", c.args, r.stderr, c.want)
		}
	}
}

// At a width ($COLUMNS here; a terminal's own otherwise) every timeline line
// is cut to fit, ending in "…" where it was cut; --wide prints them whole,
// as a pipe gets them.
func TestTraceFitsTheTerminal(t *testing.T) {
	t.Setenv("COLUMNS", "")
	url := startFakeJaeger(t, &fakeJaeger{traces: map[string][]byte{sampleTraceID: sampleTrace(t)}})
	whole := ctl(t, "", "", "trace", sampleTraceID, "--jaeger", url)
	wantCode(t, whole, 0)
	t.Setenv("COLUMNS", "80")
	cut := ctl(t, "", "", "trace", sampleTraceID, "--jaeger", url)
	wantCode(t, cut, 0)
	wholeLines, cutLines := lines(whole.stdout), lines(cut.stdout)
	if len(cutLines) != len(wholeLines) {
		t.Fatalf("%d lines at 80 columns, %d whole", len(cutLines), len(wholeLines))
	}
	shortened := 0
	for i, l := range cutLines {
		if n := utf8.RuneCountInString(l); n > 80 {
			t.Errorf("line %d is %d wide: %q", i, n, l)
		}
		if l != wholeLines[i] {
			shortened++
			if !strings.HasSuffix(l, "…") || !strings.HasPrefix(wholeLines[i], strings.TrimSuffix(l, "…")) {
				t.Errorf("line %d cut badly: %q from %q", i, l, wholeLines[i])
			}
		}
	}
	if shortened == 0 {
		t.Fatal("no line was cut at 80 columns")
	}
	if wide := ctl(t, "", "", "trace", sampleTraceID, "--jaeger", url, "--wide"); wide.stdout != whole.stdout {
		t.Fatal("--wide does not print the lines whole")
	}
}
