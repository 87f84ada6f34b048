package telemetry

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Config says who is tracing.
type Config struct {
	ServiceName string // resource service.name
	InstanceID  string // resource service.instance.id (the broker id for replicad)
	// AlwaysSample records root spans even when nothing is exported. A
	// short-lived client sets it: the sampled flag it sends makes the brokers
	// (which may export) record their side of the trace.
	AlwaysSample bool
	// Logger receives OpenTelemetry's internal errors (an unreachable
	// collector, say); the zero logger drops them.
	Logger zerolog.Logger
}

// Telemetry owns the installed tracer provider.
type Telemetry struct {
	provider  *sdktrace.TracerProvider
	exporting bool
}

// Exporting reports whether spans are sent to an OTLP endpoint.
func (t *Telemetry) Exporting() bool { return t.exporting }

// Tracer returns a tracer of the installed provider.
func (t *Telemetry) Tracer(name string) trace.Tracer { return t.provider.Tracer(name) }

// Shutdown flushes buffered spans and stops the exporter; bound it with ctx.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry shutdown: %w", err)
	}
	return nil
}

// ExportConfigured reports whether the environment asks for spans to be
// exported (see exportProtocol); a bad setting counts as no.
func ExportConfigured() bool {
	p, err := exportProtocol()
	return err == nil && p != ""
}

// exportProtocol reads the standard OpenTelemetry variables: spans are
// exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names a collector, unless
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none. The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL: grpc
// (the default here, as Jaeger's port 4317 speaks it) or http/protobuf
// (port 4318). It returns "" when nothing is to be exported, and an error
// naming the variable for a value replicad does not support.
func exportProtocol() (string, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return "", nil
	}
	switch e := os.Getenv("OTEL_TRACES_EXPORTER"); e {
	case "", "otlp":
	case "none":
		return "", nil
	default:
		return "", fmt.Errorf("OTEL_TRACES_EXPORTER=%q: want otlp or none", e)
	}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return "", nil
	}
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	p := os.Getenv(name)
	if p == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		p = os.Getenv(name)
	}
	switch p {
	case "", "grpc":
		return "grpc", nil
	case "http/protobuf":
		return p, nil
	default:
		return "", fmt.Errorf("%s=%q: want grpc or http/protobuf", name, p)
	}
}

// newExporter makes the OTLP exporter for protocol; it connects lazily and
// reads the other OTEL_EXPORTER_OTLP_* variables (headers, timeout,
// insecure, ...) itself.
func newExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	if protocol == "http/protobuf" {
		return otlptracehttp.New(ctx)
	}
	return otlptracegrpc.New(ctx)
}

// Setup builds the tracer provider and installs it, with the propagators, globally.
func Setup(ctx context.Context, cfg Config) (*Telemetry, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(
			attribute.String("service.name", cfg.ServiceName),
			attribute.String("service.instance.id", cfg.InstanceID),
		),
		// Later options win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override ours.
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	protocol, err := exportProtocol()
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	t := &Telemetry{exporting: protocol != ""}
	switch {
	case t.exporting:
		exp, err := newExporter(ctx, protocol)
		if err != nil {
			return nil, fmt.Errorf("telemetry otlp exporter: %w", err)
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
		if os.Getenv("OTEL_TRACES_SAMPLER") == "" {
			// Control-plane spans are always sampled: the broker's own
			// roots (a log dir failure, an ISR shrink, a truncation) and
			// requests from a caller that did not sample. Otherwise, as
			// OTEL_TRACES_SAMPLER's default parentbased_always_on does, a
			// sampled caller's decision is kept.
			opts = append(opts, sdktrace.WithSampler(ControlPlaneSampler()))
		}
		// With OTEL_TRACES_SAMPLER set the SDK honours it.
	case cfg.AlwaysSample:
		opts = append(opts, sdktrace.WithSampler(sdktrace.AlwaysSample()))
	default:
		// Nobody would read the spans: keep them non-recording. They still
		// carry trace ids, so context keeps flowing to the next hop.
		opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
	}
	t.provider = sdktrace.NewTracerProvider(opts...)

	otel.SetTracerProvider(t.provider)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	logger := cfg.Logger
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn().Err(err).Msg("opentelemetry")
	}))
	return t, nil
}

// ControlPlaneSampler samples every span: ParentBased(AlwaysSample) that
// also samples under a remote parent that was not sampled. Data-plane RPCs
// are kept out by not creating their spans at all (grpcx.TraceFilter), not
// by sampling.
func ControlPlaneSampler() sdktrace.Sampler {
	return sdktrace.ParentBased(sdktrace.AlwaysSample(), sdktrace.WithRemoteParentNotSampled(sdktrace.AlwaysSample()))
}
