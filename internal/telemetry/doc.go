// Package telemetry sets up OpenTelemetry tracing for replicad's binaries.
//
// Setup installs a global TracerProvider whose resource carries service.name
// (replicad, ctlclient, ...) and service.instance.id, and the W3C
// tracecontext and baggage propagators, so otelgrpc carries trace context
// across every gRPC call. Spans are exported over OTLP/gRPC only when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// variable is set; the exporter reads its other OTEL_* settings itself.
// Without an exporter nothing is recorded, so tracing costs next to nothing.
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "replicad", InstanceID: "1"})
//	defer tel.Shutdown(ctx) // flushes spans still buffered
package telemetry
