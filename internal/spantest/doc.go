// Package spantest helps tests read the spans an in-memory recorder
// (go.opentelemetry.io/otel/sdk/trace/tracetest) kept: by name, and their
// attributes as a map.
package spantest
