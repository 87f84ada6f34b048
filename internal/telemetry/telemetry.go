package telemetry

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

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
// exported (see exportFromEnv).
func ExportConfigured() bool { return exportFromEnv().protocol != "" }

// exportSettings is what the standard OpenTelemetry variables ask for.
type exportSettings struct {
	// protocol is grpc, http/protobuf or http/json; "" exports nothing.
	protocol string
	// disabled: OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none, so
	// nothing is recorded, even by a client that otherwise always samples.
	disabled bool
	// warnings are settings replicad cannot honour, logged at Setup.
	warnings []string
}

// exportFromEnv reads the standard OpenTelemetry variables, as the
// specification has them (values case-insensitive, OTEL_TRACES_EXPORTER a
// comma-separated list, an unknown value a warning, never fatal): spans are
// exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT names a collector, unless
// OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER has no otlp in it. The
// protocol is OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL: grpc (the default here, as Jaeger's port 4317
// speaks it), http/protobuf or http/json (port 4318).
func exportFromEnv() exportSettings {
	var s exportSettings
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		s.disabled = true
		return s
	}
	otlp, none := true, false
	if v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); v != "" {
		otlp = false
		var unknown []string
		for _, e := range strings.Split(v, ",") {
			switch e = strings.ToLower(strings.TrimSpace(e)); e {
			case "otlp":
				otlp = true
			case "none":
				none = true
			case "":
			default:
				unknown = append(unknown, e)
			}
		}
		if len(unknown) > 0 {
			s.warnings = append(s.warnings, fmt.Sprintf("OTEL_TRACES_EXPORTER=%q: replicad exports only otlp; %s ignored", v, strings.Join(unknown, ", ")))
		}
	}
	if !otlp {
		s.disabled = none
		return s
	}
	endpoint, tracesEndpoint := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" && tracesEndpoint == "" {
		return s
	}
	name := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	p := strings.ToLower(strings.TrimSpace(os.Getenv(name)))
	if p == "" {
		name = "OTEL_EXPORTER_OTLP_PROTOCOL"
		p = strings.ToLower(strings.TrimSpace(os.Getenv(name)))
	}
	switch p {
	case "", "grpc":
		s.protocol = "grpc"
	case "http/protobuf", "http/json":
		s.protocol = p
		// The per-signal endpoint is used as it is: without a path the
		// spans go to "/", which a collector answers with 404.
		if u, err := url.Parse(tracesEndpoint); tracesEndpoint != "" && err == nil && (u.Path == "" || u.Path == "/") {
			s.warnings = append(s.warnings, fmt.Sprintf("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=%q has no path: over %s it is used as it is; "+
				"a collector takes spans at /v1/traces (or set OTEL_EXPORTER_OTLP_ENDPOINT, to which /v1/traces is added)", tracesEndpoint, p))
		}
	default:
		s.protocol = "grpc"
		s.warnings = append(s.warnings, fmt.Sprintf("%s=%q: want grpc, http/protobuf or http/json; using grpc", name, p))
	}
	return s
}

// newExporter makes the OTLP exporter for protocol; it connects lazily and
// reads the other OTEL_EXPORTER_OTLP_* variables (headers, timeout,
// insecure, and for HTTP the protobuf or JSON encoding) itself.
func newExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	if strings.HasPrefix(protocol, "http/") {
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
	env := exportFromEnv()
	for _, w := range env.warnings {
		cfg.Logger.Warn().Str("component", "telemetry").Msg(w)
	}
	t := &Telemetry{exporting: env.protocol != ""}
	switch {
	case env.disabled:
		// Switched off: not even a client's own spans are sampled, so no
		// sampled flag reaches brokers that do export.
		opts = append(opts, sdktrace.WithSampler(sdktrace.NeverSample()))
	case t.exporting:
		exp, err := newExporter(ctx, env.protocol)
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

// ExportAddress is the host:port the environment's OTLP endpoint names
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT),
// with the protocol's default port when it names none (4317 for gRPC,
// 4318 for HTTP); "" when nothing is exported.
func ExportAddress() string {
	s := exportFromEnv()
	if s.protocol == "" {
		return ""
	}
	ep := strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	if ep == "" {
		ep = strings.TrimSpace(os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	host := ep
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return ""
		}
		host = u.Host
	}
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	port := "4317"
	if strings.HasPrefix(s.protocol, "http/") {
		port = "4318"
	}
	return net.JoinHostPort(host, port)
}

// Reachable dials addr once, within timeout, in the background, and
// reports on the channel whether it answered. A short-lived command uses it
// to skip the span flush at exit when nothing listens at the endpoint: the
// exporter would otherwise retry until its deadline.
func Reachable(addr string, timeout time.Duration) <-chan bool {
	out := make(chan bool, 1)
	go func() {
		c, err := net.DialTimeout("tcp", addr, timeout)
		if err == nil {
			c.Close()
		}
		out <- err == nil
	}()
	return out
}
