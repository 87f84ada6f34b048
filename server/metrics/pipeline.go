package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
)

// newPipeline is what a broker's and a controller's metrics share: a
// private Prometheus registry with the Go runtime and process collectors,
// and an OpenTelemetry MeterProvider whose only reader is the Prometheus
// exporter on that registry, exporting names exactly as given.
func newPipeline() (*prometheus.Registry, *sdkmetric.MeterProvider, error) {
	registry := prometheus.NewRegistry()
	if err := registry.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, fmt.Errorf("metrics: register go collector: %w", err)
	}
	if err := registry.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, fmt.Errorf("metrics: register process collector: %w", err)
	}
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(registry),
		// Names as given: they already carry their unit and _total.
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithoutSuffixes),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	provider := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(exporter),
		sdkmetric.WithResource(resource.Empty()),
		// The SDK's default of 2000 series per instrument would fold a
		// broker's 2001st topic into an overflow series. The series are
		// bounded anyway: by the topics hosted, and by methods x codes.
		sdkmetric.WithCardinalityLimit(0),
		// Prometheus text carries no exemplars; offering one per sampled
		// request (the SDK's default) would be work on the produce path
		// that no scrape ever reads.
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter),
	)
	return registry, provider, nil
}
