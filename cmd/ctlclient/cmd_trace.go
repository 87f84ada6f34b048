package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// `ctlclient trace` reads a trace back from Jaeger's query service (the HTTP
// API the Jaeger UI uses: GET /api/traces/{id} and GET /api/traces?service=)
// and prints it as an indented timeline, so a transition can be followed
// from a terminal without the UI.

const defaultJaegerURL = "http://127.0.0.1:16686"

// traceSelfOperation is the root span of `ctlclient trace` itself: `last`
// passes over those traces, so looking at a trace does not hide it.
const traceSelfOperation = "ctlclient trace"

// traceIDRE is a Jaeger trace id: up to 32 hex digits.
var traceIDRE = regexp.MustCompile(`^[0-9a-fA-F]{1,32}$`)

func traceCommand() *command {
	return &command{
		name:    "trace",
		summary: "print a trace from Jaeger as an indented timeline",
		usage:   "last|TRACE_ID [--jaeger URL] [--service S] [--operation OP] [--lookback D] [--limit N] [--events]",
		args:    true,
		details: `Fetches one trace from Jaeger's query API and prints one line per span:
start offset from the trace's first span, duration, the span name indented
under its parent, the service and its service.instance.id (the broker id for
replicad), and the key attributes: every replicad.* attribute, without the
prefix (topic, partition, leader, leader_epoch first), and error with the
span's status message when it failed. Spans are sorted by start time under
their parent; a span whose parent is not in the trace (not exported, or not
yet arrived) starts at depth 0 and says so. Links (FOLLOWS_FROM) and the
number of events are noted at the end of the line; --events prints each event
(its name and fields) on a line of its own under the span.

TRACE_ID is the 32-hex-digit id (as the Jaeger UI shows it). "last" is the
newest trace holding a span of --service (named --operation, if given) within
--lookback, passing over the traces of "ctlclient trace" itself. The last
failover the controller made is
  ctlclient trace last --service replicad-controller --operation Controller.fenceBrokers

-o json prints Jaeger's JSON for the trace (GET /api/traces/{id}) as Jaeger
sent it.

Exits 1 when Jaeger cannot be reached or answers with an error, or the trace
is not there (yet: exporters send spans in batches, every few seconds unless
OTEL_BSP_SCHEDULE_DELAY says otherwise); 2 for usage errors.`,
		example: "ctlclient trace last --jaeger http://127.0.0.1:16686\n" +
			"ctlclient trace last --service replicad-controller --operation Controller.fenceBrokers\n" +
			"ctlclient trace 4bf92f3577b34da6a3ce929d0e0e4736 -o json",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			def := defaultJaegerURL
			if v := os.Getenv("CTLCLIENT_JAEGER"); v != "" {
				def = v
			}
			jaeger := fs.String("jaeger", def, "Jaeger query `URL` (the UI's address); env CTLCLIENT_JAEGER")
			service := fs.String("service", "ctlclient", "with last: the `service` whose newest trace is shown (ctlclient, replicad-controller, replicad)")
			operation := fs.String("operation", "", "with last: only traces with a span of this `name` in --service (ctlclient elect, Controller.fenceBrokers, ...)")
			lookback := fs.Duration("lookback", time.Hour, "with last: how far back to look")
			events := fs.Bool("events", false, "print each span's events (logs) under it, not just how many")
			wide := fs.Bool("wide", false, "print every line whole; by default each line is cut at the terminal's width ($COLUMNS,\nelse the terminal's; a pipe gets whole lines)")
			limit := fs.Int("limit", 20, "with last: how many of the newest traces of --service to look through\n(for ctlclient, 50 more: earlier runs of ctlclient trace are passed over)")
			return func(ctx context.Context, e *env) error {
				which, err := traceArgs(fs)
				if err != nil {
					return err
				}
				// Flags after the positional argument were parsed just now:
				// check the global ones again.
				if err := e.g.validate(); err != nil {
					return usagef("%v", err)
				}
				base, err := jaegerBaseURL(*jaeger)
				if err != nil {
					return err
				}
				if *lookback <= 0 {
					return usagef("--lookback must be positive (got %v)", *lookback)
				}
				if *limit < 1 {
					return usagef("--limit must be >= 1 (got %d)", *limit)
				}
				if *service == "" {
					return usagef("--service must not be empty")
				}
				jc := newJaegerClient(base, e.g.timeout)
				defer jc.close()
				id := which
				if which == "last" {
					if id, err = jc.lastTraceID(ctx, *service, *operation, *lookback, *limit); err != nil {
						return err
					}
				}
				raw, tr, err := jc.trace(ctx, id)
				if err != nil {
					return err
				}
				if e.jsonOutput() {
					_, err = e.stdout.Write(raw)
					if err == nil && (len(raw) == 0 || raw[len(raw)-1] != '\n') {
						_, err = io.WriteString(e.stdout, "\n")
					}
					return err
				}
				w := e.stdout
				if width := outputWidth(e.stdout); !*wide && width > 0 {
					fw := &fitWriter{w: e.stdout, width: width}
					defer fw.flush()
					w = fw
				}
				return printTimeline(w, tr, *events)
			}
		},
	}
}

// traceArgs takes the one positional argument (last or a trace id) and
// parses the flags that follow it: `trace last --jaeger URL`.
func traceArgs(fs *flag.FlagSet) (string, error) {
	var pos []string
	for fs.NArg() > 0 {
		pos = append(pos, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return "", usagef("%v", err)
		}
	}
	switch {
	case len(pos) == 0:
		return "", usagef("want last or a TRACE_ID")
	case len(pos) > 1:
		return "", usagef("want one of last or a TRACE_ID (got %q)", strings.Join(pos, " "))
	case pos[0] == "last":
		return "last", nil
	case !traceIDRE.MatchString(pos[0]):
		return "", usagef("%q is neither last nor a trace id (up to 32 hex digits)", pos[0])
	}
	return strings.ToLower(pos[0]), nil
}

// jaegerBaseURL checks --jaeger: an http(s) URL, the UI's base address.
func jaegerBaseURL(s string) (*url.URL, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usagef("--jaeger: want an http URL like %s (got %q)", defaultJaegerURL, s)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// jaegerClient asks Jaeger's query HTTP API.
type jaegerClient struct {
	base    *url.URL
	timeout time.Duration // of each request
	http    *http.Client
}

func newJaegerClient(base *url.URL, timeout time.Duration) *jaegerClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &jaegerClient{base: base, timeout: timeout, http: &http.Client{Transport: tr}}
}

// close drops the kept-alive connections (and their goroutines).
func (j *jaegerClient) close() { j.http.CloseIdleConnections() }

// The shapes of Jaeger's /api/traces answers (the UI's JSON model).
type (
	jaegerResponse struct {
		Data   []jaegerTrace `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
	}
	jaegerTrace struct {
		TraceID   string                   `json:"traceID"`
		Spans     []jaegerSpan             `json:"spans"`
		Processes map[string]jaegerProcess `json:"processes"`
	}
	jaegerSpan struct {
		TraceID       string      `json:"traceID"`
		SpanID        string      `json:"spanID"`
		OperationName string      `json:"operationName"`
		References    []jaegerRef `json:"references"`
		StartTime     int64       `json:"startTime"` // µs since the epoch
		Duration      int64       `json:"duration"`  // µs
		Tags          []jaegerTag `json:"tags"`
		Logs          []jaegerLog `json:"logs"` // the span's events
		ProcessID     string      `json:"processID"`
	}
	jaegerLog struct {
		Timestamp int64       `json:"timestamp"` // µs since the epoch
		Fields    []jaegerTag `json:"fields"`    // "event" is its name
	}
	jaegerRef struct {
		RefType string `json:"refType"` // CHILD_OF, FOLLOWS_FROM
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	}
	jaegerTag struct {
		Key   string          `json:"key"`
		Type  string          `json:"type"` // string, bool, int64, float64, binary
		Value json.RawMessage `json:"value"`
	}
	jaegerProcess struct {
		ServiceName string      `json:"serviceName"`
		Tags        []jaegerTag `json:"tags"`
	}
)

// get fetches path?query and decodes Jaeger's envelope; it returns the body
// as sent, the status and the decoded answer.
func (j *jaegerClient) get(ctx context.Context, path string, query url.Values) ([]byte, int, *jaegerResponse, error) {
	u := *j.base
	u.Path += path
	u.RawQuery = query.Encode()
	ctx, cancel := context.WithTimeout(ctx, j.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, nil, err
	}
	resp, err := j.http.Do(req)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("jaeger at %s unreachable: %w", j.base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJaegerAnswer+1))
	if err != nil {
		return nil, resp.StatusCode, nil, fmt.Errorf("jaeger at %s: reading %s: %w", j.base, u.Path, err)
	}
	if len(body) > maxJaegerAnswer {
		return nil, resp.StatusCode, nil, fmt.Errorf("jaeger at %s: GET %s: the answer is larger than %d MiB (a trace of a data-plane run?); narrow it with --operation or --lookback",
			j.base, u.Path, maxJaegerAnswer>>20)
	}
	var jr jaegerResponse
	if err := json.Unmarshal(body, &jr); err != nil {
		if resp.StatusCode != http.StatusOK {
			return body, resp.StatusCode, nil, fmt.Errorf("jaeger at %s: GET %s: %s: %s", j.base, u.Path, resp.Status, snippet(body))
		}
		return body, resp.StatusCode, nil, fmt.Errorf("jaeger at %s: GET %s: not Jaeger's JSON (is --jaeger the query service, port 16686?): %v", j.base, u.Path, err)
	}
	return body, resp.StatusCode, &jr, nil
}

// maxJaegerAnswer bounds what ctlclient reads of one answer.
const maxJaegerAnswer = 256 << 20

// selfTraceMargin is how many more traces `trace last` asks Jaeger for than
// --limit: the traces of earlier `ctlclient trace` runs (exported like any
// other command's) are passed over, and must not crowd out the ones sought.
const selfTraceMargin = 50

// searchLimit is how many traces to ask Jaeger for: limit, and for
// ctlclient's own service selfTraceMargin more.
func searchLimit(service string, limit int) int {
	if service == "ctlclient" {
		return limit + selfTraceMargin
	}
	return limit
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// errorText is Jaeger's error messages, or the start of body when it sent
// none (a proxy's error page, say).
func (r *jaegerResponse) errorText(body []byte) string {
	var msgs []string
	for _, e := range r.Errors {
		msgs = append(msgs, e.Msg)
	}
	if len(msgs) == 0 {
		if s := snippet(body); s != "" {
			return s
		}
		return "(no error message)"
	}
	return strings.Join(msgs, "; ")
}

// trace fetches one trace: the body as Jaeger sent it, and decoded.
func (j *jaegerClient) trace(ctx context.Context, id string) ([]byte, *jaegerTrace, error) {
	body, status, jr, err := j.get(ctx, "/api/traces/"+url.PathEscape(id), nil)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case status == http.StatusNotFound || (status == http.StatusOK && (len(jr.Data) == 0 || len(jr.Data[0].Spans) == 0)):
		return nil, nil, answerError{fmt.Sprintf("trace %s not found in Jaeger at %s (spans are exported in batches: it may not have arrived yet)", id, j.base)}
	case status != http.StatusOK:
		return nil, nil, answerError{fmt.Sprintf("jaeger at %s: trace %s: HTTP %d: %s", j.base, id, status, jr.errorText(body))}
	}
	return body, &jr.Data[0], nil
}

// lastTraceID is the id of the newest trace (by its first span's start)
// holding a span of service (named operation, unless empty) within
// lookback, traces of `ctlclient trace` itself left out.
func (j *jaegerClient) lastTraceID(ctx context.Context, service, operation string, lookback time.Duration, limit int) (string, error) {
	now := time.Now()
	q := url.Values{
		"service": {service},
		"limit":   {strconv.Itoa(searchLimit(service, limit))},
		"start":   {strconv.FormatInt(now.Add(-lookback).UnixMicro(), 10)},
		"end":     {strconv.FormatInt(now.Add(time.Minute).UnixMicro(), 10)}, // a little clock skew
	}
	what := "service " + service
	if operation != "" {
		q.Set("operation", operation)
		what = fmt.Sprintf("%s in service %s", operation, service)
	}
	body, status, jr, err := j.get(ctx, "/api/traces", q)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", answerError{fmt.Sprintf("jaeger at %s: traces of %s: HTTP %d: %s", j.base, what, status, jr.errorText(body))}
	}
	best, bestStart := "", int64(0)
	for i := range jr.Data {
		tr := &jr.Data[i]
		if len(tr.Spans) == 0 || isTraceOfTrace(tr) {
			continue
		}
		start := traceStart(tr)
		if best == "" || start > bestStart || (start == bestStart && tr.TraceID > best) {
			best, bestStart = tr.TraceID, start
		}
	}
	if best == "" {
		return "", answerError{fmt.Sprintf("no trace of %s in the last %s in Jaeger at %s", what, lookback, j.base)}
	}
	return best, nil
}

// isTraceOfTrace reports whether tr is a `ctlclient trace` run.
func isTraceOfTrace(tr *jaegerTrace) bool {
	for _, s := range tr.Spans {
		if s.OperationName == traceSelfOperation && tr.Processes[s.ProcessID].ServiceName == "ctlclient" {
			return true
		}
	}
	return false
}

func traceStart(tr *jaegerTrace) int64 {
	start := tr.Spans[0].StartTime
	for _, s := range tr.Spans[1:] {
		start = min(start, s.StartTime)
	}
	return start
}

// timelineSpan is a span placed in the tree.
type timelineSpan struct {
	span     *jaegerSpan
	orphanOf string // the parent span id not in the trace
	children []*timelineSpan
}

// printTimeline prints tr as
//
//	trace ID: N spans from P processes, DURATION, started TIME
//	      START    DURATION  SPAN
//	    0.000ms    48.210ms  ctlclient elect  [ctlclient host/4242]
//	    1.250ms    45.870ms    Controller.electLeader  [replicad-controller 127.0.0.1:9090]  replicad.topic=orders ...
//
// one line per span, children under their parent sorted by start.
func printTimeline(w io.Writer, tr *jaegerTrace, events bool) error {
	byID := make(map[string]*timelineSpan, len(tr.Spans))
	nodes := make([]*timelineSpan, len(tr.Spans))
	for i := range tr.Spans {
		nodes[i] = &timelineSpan{span: &tr.Spans[i]}
		if _, dup := byID[tr.Spans[i].SpanID]; !dup {
			byID[tr.Spans[i].SpanID] = nodes[i]
		}
	}
	var roots []*timelineSpan
	for _, n := range nodes {
		parentID := parentSpanID(n.span)
		switch p := byID[parentID]; {
		case parentID == "":
			roots = append(roots, n)
		case p == nil || p == n:
			n.orphanOf = parentID
			roots = append(roots, n)
		default:
			p.children = append(p.children, n)
		}
	}
	start := traceStart(tr)
	end := start
	processes := map[string]bool{}
	for _, s := range tr.Spans {
		end = max(end, s.StartTime+s.Duration)
		processes[s.ProcessID] = true
	}
	fmt.Fprintf(w, "trace %s: %d spans from %d processes, %s, started %s\n", tr.TraceID, len(tr.Spans), len(processes),
		fmtMs(end-start), time.UnixMicro(start).UTC().Format("2006-01-02T15:04:05.000000Z"))
	fmt.Fprintf(w, "%11s %11s  %s\n", "START", "DURATION", "SPAN")

	// Reaching every node from a root keeps a reference cycle (a corrupt
	// trace) from printing forever or hiding spans.
	printed := map[*timelineSpan]bool{}
	var walk func(n *timelineSpan, depth int)
	walk = func(n *timelineSpan, depth int) {
		if printed[n] {
			return
		}
		printed[n] = true
		fmt.Fprintln(w, timelineLine(tr, n, start, depth, !events))
		if events {
			printEvents(w, n.span, start, depth+1)
		}
		sortByStart(n.children)
		for _, c := range n.children {
			walk(c, depth+1)
		}
	}
	sortByStart(roots)
	for _, r := range roots {
		walk(r, 0)
	}
	for _, n := range nodes {
		if !printed[n] {
			n.orphanOf = parentSpanID(n.span)
			walk(n, 0)
		}
	}
	return nil
}

// parentSpanID is the span's CHILD_OF reference within its trace.
func parentSpanID(s *jaegerSpan) string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && (r.TraceID == "" || r.TraceID == s.TraceID) {
			return r.SpanID
		}
	}
	return ""
}

func sortByStart(ns []*timelineSpan) {
	slices.SortStableFunc(ns, func(a, b *timelineSpan) int {
		return cmp.Or(cmp.Compare(a.span.StartTime, b.span.StartTime), cmp.Compare(a.span.SpanID, b.span.SpanID))
	})
}

func timelineLine(tr *jaegerTrace, n *timelineSpan, start int64, depth int, countEvents bool) string {
	s := n.span
	var b strings.Builder
	fmt.Fprintf(&b, "%11s %11s  %s%s", fmtMs(s.StartTime-start), fmtMs(s.Duration), strings.Repeat("  ", depth), s.OperationName)
	fmt.Fprintf(&b, "  [%s]", processName(tr, s))
	if attrs := keyAttributes(s); attrs != "" {
		b.WriteString("  " + attrs)
	}
	for _, r := range s.References {
		if r.RefType == "FOLLOWS_FROM" {
			fmt.Fprintf(&b, "  (follows from %s)", linkName(tr, r))
		}
	}
	switch n := len(s.Logs); {
	case !countEvents:
	case n == 1:
		b.WriteString("  (1 event)")
	case n > 1:
		fmt.Fprintf(&b, "  (%d events)", n)
	}
	if n.orphanOf != "" {
		fmt.Fprintf(&b, "  (parent %s not in the trace)", n.orphanOf)
	}
	return b.String()
}

// printEvents prints s's events (Jaeger's logs) by time, one line each:
// offset, "· name" indented to depth, and its fields.
func printEvents(w io.Writer, s *jaegerSpan, start int64, depth int) {
	logs := slices.Clone(s.Logs)
	slices.SortStableFunc(logs, func(a, b jaegerLog) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
	for _, l := range logs {
		name := "event"
		var fields []jaegerTag
		for _, f := range l.Fields {
			if f.Key == "event" {
				name = tagValue(f)
			} else {
				fields = append(fields, f)
			}
		}
		line := fmt.Sprintf("%11s %11s  %s· %s", fmtMs(l.Timestamp-start), "", strings.Repeat("  ", depth), name)
		if attrs := fieldList(fields); attrs != "" {
			line += "  " + attrs
		}
		fmt.Fprintln(w, line)
	}
}

// processName is "service instance": "replicad 2", "ctlclient host/4242".
func processName(tr *jaegerTrace, s *jaegerSpan) string {
	p := tr.Processes[s.ProcessID]
	name := p.ServiceName
	if name == "" {
		name = "?"
	}
	if inst := tagString(p.Tags, "service.instance.id"); inst != "" {
		name += " " + inst
	}
	return name
}

// linkName names a FOLLOWS_FROM reference: the span and its process when it
// is in this trace, else "span S of trace T".
func linkName(tr *jaegerTrace, r jaegerRef) string {
	if r.TraceID == "" || r.TraceID == tr.TraceID {
		for i := range tr.Spans {
			if s := &tr.Spans[i]; s.SpanID == r.SpanID {
				return s.OperationName + " [" + processName(tr, s) + "]"
			}
		}
	}
	return "span " + r.SpanID + " of trace " + r.TraceID
}

// firstAttributes lead a span's attributes, in this order; the other
// replicad.* ones follow sorted by name.
var firstAttributes = []string{"topic", "partition", "broker", "leader", "leader_epoch", "old_leader",
	"old_leader_epoch", "isr", "error_code"}

// keyAttributes are the span's replicad.* tags, named without the prefix,
// and its error status: "topic=orders partition=0 leader=2 ... error=...".
func keyAttributes(s *jaegerSpan) string {
	var keys []jaegerTag
	failed, status := false, ""
	for _, t := range s.Tags {
		switch {
		case strings.HasPrefix(t.Key, "replicad."):
			keys = append(keys, t)
		case t.Key == "error":
			failed = failed || tagValue(t) == "true"
		case t.Key == "otel.status_code":
			failed = failed || tagValue(t) == "ERROR"
		case t.Key == "otel.status_description":
			status = tagValue(t)
		}
	}
	out := fieldList(keys)
	if failed {
		if status == "" {
			status = "true"
		}
		if out != "" {
			out += " "
		}
		out += "error=" + quoteIfSpaced(status)
	}
	return out
}

// fieldList prints tags as "k=v k=v": replicad.* without the prefix,
// firstAttributes first, then the rest by name.
func fieldList(tags []jaegerTag) string {
	type kv struct{ k, v string }
	attrs := make([]kv, 0, len(tags))
	for _, t := range tags {
		attrs = append(attrs, kv{strings.TrimPrefix(t.Key, "replicad."), tagValue(t)})
	}
	rank := func(k string) int {
		if i := slices.Index(firstAttributes, k); i >= 0 {
			return i
		}
		return len(firstAttributes)
	}
	slices.SortStableFunc(attrs, func(a, b kv) int { return cmp.Or(cmp.Compare(rank(a.k), rank(b.k)), cmp.Compare(a.k, b.k)) })
	parts := make([]string, 0, len(attrs))
	for _, a := range attrs {
		parts = append(parts, a.k+"="+quoteIfSpaced(a.v))
	}
	return strings.Join(parts, " ")
}

func tagString(tags []jaegerTag, key string) string {
	for _, t := range tags {
		if t.Key == key {
			return tagValue(t)
		}
	}
	return ""
}

// tagValue formats a tag's value: strings unquoted, numbers and booleans
// as Jaeger wrote them (so int64 values keep every digit).
func tagValue(t jaegerTag) string {
	raw := strings.TrimSpace(string(t.Value))
	if strings.HasPrefix(raw, `"`) {
		var s string
		if err := json.Unmarshal(t.Value, &s); err == nil {
			return s
		}
	}
	if raw == "null" {
		return ""
	}
	return raw
}

// quoteIfSpaced quotes a value that would not read as one word.
func quoteIfSpaced(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return strconv.Quote(s)
	}
	return s
}

// fmtMs prints µs as milliseconds with three decimals: "12.345ms".
func fmtMs(us int64) string {
	return strconv.FormatFloat(float64(us)/1000, 'f', 3, 64) + "ms"
}
