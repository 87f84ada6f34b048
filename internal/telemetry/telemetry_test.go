package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

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
// OTEL_TRACES_EXPORTER=none win over an endpoint.
func TestExportSwitchedOffByStandardVariables(t *testing.T) {
	for _, kv := range [][2]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		t.Run(kv[0], func(t *testing.T) {
			unsetExportEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(kv[0], kv[1])
			tel, err := Setup(context.Background(), Config{ServiceName: "replicad", InstanceID: "1"})
			if err != nil {
				t.Fatal(err)
			}
			defer tel.Shutdown(context.Background())
			if tel.Exporting() || ExportConfigured() {
				t.Fatalf("exporting with %s=%s", kv[0], kv[1])
			}
		})
	}
}

// TestBadExportSettingIsAnError: a value replicad cannot honour fails Setup
// with the variable's name, rather than silently not exporting.
func TestBadExportSettingIsAnError(t *testing.T) {
	for _, kv := range [][2]string{{"OTEL_TRACES_EXPORTER", "zipkin"}, {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"},
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "carrier-pigeon"}} {
		t.Run(kv[0], func(t *testing.T) {
			unsetExportEnv(t)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
			t.Setenv(kv[0], kv[1])
			_, err := Setup(context.Background(), Config{ServiceName: "replicad", InstanceID: "1"})
			if err == nil || !strings.Contains(err.Error(), kv[0]) {
				t.Fatalf("Setup with %s=%s: %v, want an error naming it", kv[0], kv[1], err)
			}
		})
	}
}

// TestExportOverHTTP: OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf posts the
// spans to the endpoint's /v1/traces.
func TestExportOverHTTP(t *testing.T) {
	unsetExportEnv(t)
	got := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- r.Method + " " + r.URL.Path + " " + r.Header.Get("Content-Type") + " " + strconv.Itoa(len(body))
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
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
		if !strings.HasPrefix(req, "POST /v1/traces application/x-protobuf ") || strings.HasSuffix(req, " 0") {
			t.Fatalf("collector got %q, want a POST of protobuf spans to /v1/traces", req)
		}
	default:
		t.Fatal("no export reached the HTTP collector")
	}
}
