package telemetry

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

func unsetExportEnv(t *testing.T) {
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
		"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		t.Setenv(v, "")
	}
}

// TestNoExporterWithoutEndpoint ensures that without OTEL endpoints nothing
// is exported and a server's spans are not recorded, yet carry trace ids.
func TestNoExporterWithoutEndpoint(t *testing.T) {
	unsetExportEnv(t)
	tel, err := Setup(context.Background(), Config{ServiceName: "replicad", InstanceID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if tel.Exporting() {
		t.Fatal("exporting without an endpoint")
	}
	_, span := otel.Tracer("test").Start(context.Background(), "op")
	defer span.End()
	if span.IsRecording() {
		t.Error("span recorded although nothing exports it")
	}
	if !span.SpanContext().HasTraceID() {
		t.Error("span has no trace id to propagate")
	}
}

// TestClientSamplesAndPropagatesTraceparent ensures a client (AlwaysSample)
// sends a sampled W3C traceparent header even without an exporter.
func TestClientSamplesAndPropagatesTraceparent(t *testing.T) {
	unsetExportEnv(t)
	tel, err := Setup(context.Background(), Config{ServiceName: "ctlclient", InstanceID: "x", AlwaysSample: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	ctx, span := tel.Tracer("test").Start(context.Background(), "ctlclient describe")
	defer span.End()
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	tp := carrier.Get("traceparent")
	if tp == "" || tp[len(tp)-2:] != "01" {
		t.Fatalf("traceparent = %q, want a sampled one", tp)
	}
	if got := trace.SpanContextFromContext(ctx).TraceID().String(); tp[3:35] != got {
		t.Fatalf("traceparent %q does not carry trace id %s", tp, got)
	}
}

// TestExporterWhenEndpointSet ensures an endpoint in the environment turns
// the OTLP exporter on, and Shutdown returns even with no collector listening.
func TestExporterWhenEndpointSet(t *testing.T) {
	unsetExportEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tel, err := Setup(context.Background(), Config{ServiceName: "replicad", InstanceID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Exporting() {
		t.Fatal("not exporting with OTEL_EXPORTER_OTLP_ENDPOINT set")
	}
	_, span := otel.Tracer("test").Start(context.Background(), "op")
	if !span.IsRecording() {
		t.Error("span not recorded although it is exported")
	}
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	_ = tel.Shutdown(ctx) // an unreachable collector may fail the flush; it must not hang
}

// TestControlPlaneAlwaysSampled ensures a broker exporting spans records its
// own root spans and the spans of a request whose caller did not sample.
func TestControlPlaneAlwaysSampled(t *testing.T) {
	unsetExportEnv(t)
	t.Setenv("OTEL_TRACES_SAMPLER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	tel, err := Setup(context.Background(), Config{ServiceName: "replicad", InstanceID: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		defer cancel()
		_ = tel.Shutdown(ctx)
	}()
	_, root := otel.Tracer("test").Start(context.Background(), "ReplicaManager.markPartitionOffline")
	defer root.End()
	if !root.IsRecording() {
		t.Error("a root span of the broker's own is not sampled")
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true})
	_, child := otel.Tracer("test").Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "ReplicaManager.becomeLeaderOrFollower")
	defer child.End()
	if !child.IsRecording() || child.SpanContext().TraceID() != remote.TraceID() {
		t.Error("a request from a caller that did not sample is not sampled in the caller's trace")
	}
}

// TestExportSwitchedOffByStandardVariables: OTEL_SDK_DISABLED=true and
// OTEL_TRACES_EXPORTER=none win over an endpoint, in any case, and then not
// even a client that always samples records (no sampled flag goes out).
func TestExportSwitchedOffByStandardVariables(t *testing.T) {
	for _, kv := range [][2]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_SDK_DISABLED", " TRUE"},
		{"OTEL_TRACES_EXPORTER", "none"}, {"OTEL_TRACES_EXPORTER", "None"}} {
		t.Run(kv[0]+"="+kv[1], func(t *testing.T) {
			unsetExportEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(kv[0], kv[1])
			tel, err := Setup(context.Background(), Config{ServiceName: "ctlclient", InstanceID: "1", AlwaysSample: true})
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			if tel.Exporting() || ExportConfigured() {
				t.Fatalf("exporting with %s=%s", kv[0], kv[1])
			}
			_, span := tel.Tracer("test").Start(context.Background(), "ctlclient describe")
			defer span.End()
			if span.IsRecording() || span.SpanContext().IsSampled() {
				t.Error("a switched-off client still samples its spans")
			}
		})
	}
}

// TestExportSettingsAsTheSpecReadsThem: values are case-insensitive,
// OTEL_TRACES_EXPORTER is a list, and what replicad cannot honour is a
// warning naming the variable, never a refusal to start.
func TestExportSettingsAsTheSpecReadsThem(t *testing.T) {
	for _, c := range []struct {
		env      map[string]string
		protocol string // "" exports nothing
		warning  string // "" none
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "OTLP"}, "grpc", ""},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp, console"}, "grpc", "console ignored"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "", "zipkin ignored"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "HTTP/Protobuf"}, "http/protobuf", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, "http/json", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "grpc", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "carrier-pigeon"}, "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http/protobuf", "has no path"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "http/protobuf", ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ""}, "", ""},
	} {
		unsetExportEnv(t)
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
		for k, v := range c.env {
			t.Setenv(k, v)
		}
		var logged bytes.Buffer
		tel, err := Setup(context.Background(), Config{ServiceName: "replicad", InstanceID: "1", Logger: zerolog.New(&logged)})
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		got := exportFromEnv()
		if got.protocol != c.protocol || tel.Exporting() != (c.protocol != "") {
			t.Errorf("%v: protocol %q (exporting %v), want %q", c.env, got.protocol, tel.Exporting(), c.protocol)
		}
		if c.warning == "" && logged.Len() > 0 || !strings.Contains(logged.String(), c.warning) {
			t.Errorf("%v: logged %q, want a warning with %q", c.env, logged.String(), c.warning)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 0)
		_ = tel.Shutdown(ctx)
		cancel()
	}
}

// TestExportOverHTTP: OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf and
// http/json post the spans to the endpoint's /v1/traces in that encoding.
func TestExportOverHTTP(t *testing.T) {
	for protocol, contentType := range map[string]string{"http/protobuf": "application/x-protobuf", "http/json": "application/json"} {
		t.Run(protocol, func(t *testing.T) {
			unsetExportEnv(t)
			got := make(chan string, 16)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type") + " " + strconv.Itoa(len(body))
				w.Header().Set("Content-Type", contentType)
			}))
			defer srv.Close()
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			tel, err := Setup(context.Background(), Config{ServiceName: "replicad", InstanceID: "1"})
			if err != nil {
				t.Fatal(err)
			}
			_, span := otel.Tracer("test").Start(context.Background(), "op")
			span.End()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tel.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case req := <-got:
				if !strings.HasPrefix(req, "POST /v1/traces "+contentType+" ") || strings.HasSuffix(req, " 0") {
					t.Fatalf("collector got %q, want a POST of %s spans to /v1/traces", req, contentType)
				}
			default:
				t.Fatal("no export reached the HTTP collector")
			}
		})
	}
}

func TestExportAddress(t *testing.T) {
	for _, tc := range []struct{ endpoint, traces, protocol, want string }{
		{"", "", "", ""},
		{"http://collector:4317", "", "", "collector:4317"},
		{"http://collector", "", "", "collector:4317"},
		{"http://collector", "", "http/protobuf", "collector:4318"},
		{"http://a:1", "https://b:2/v1/traces", "", "b:2"},
		{"127.0.0.1:9", "", "", "127.0.0.1:9"},
	} {
		t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tc.endpoint)
		t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", tc.traces)
		t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.protocol)
		if got := ExportAddress(); got != tc.want {
			t.Errorf("endpoint %q traces %q protocol %q: %q, want %q", tc.endpoint, tc.traces, tc.protocol, got, tc.want)
		}
	}
}
