// Package telemetry sets up OpenTelemetry tracing for replicad's binaries.
//
// Setup installs a global TracerProvider whose resource carries service.name
// (replicad, ctlclient, ...) and service.instance.id, and the W3C
// tracecontext and baggage propagators, so otelgrpc carries trace context
// across every gRPC call. Spans are exported over OTLP only when the
// standard OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
// variable is set, and OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none
// are not; OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL picks grpc (the default) or
// http/protobuf, and the exporter reads its other OTEL_* settings itself. A
// value replicad cannot honour fails Setup with the variable's name. Without
// an exporter nothing is recorded, so tracing costs next to nothing.
//
// ErrorCode names an outcome the same way on every span (Kafka's names,
// "NONE", "STALE_CONTROLLER_EPOCH"), whichever side recorded it.
//
//	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "replicad", InstanceID: "1"})
//	defer tel.Shutdown(ctx) // flushes spans still buffered
package telemetry
