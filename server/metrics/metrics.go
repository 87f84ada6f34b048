package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
)

// meterName is the instrumentation scope of every instrument (not exported
// as a label: see WithoutScopeInfo).
const meterName = "github.com/replicad/replicad"

// Bucket boundaries in seconds. The SDK's defaults are for milliseconds.
var (
	requestBuckets    = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	checkpointBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// Metrics is a broker's metrics: the instruments, the provider and exporter
// behind them, and the registry the HTTP handler reads. Its methods are safe
// for concurrent use, and for a nil *Metrics (they then do nothing).
type Metrics struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	meter    metric.Meter

	isrShrinks   metric.Int64Counter
	isrExpands   metric.Int64Counter
	hwCheckpoint metric.Float64Histogram
	requests     metric.Float64Histogram
	// denied counts the calls authorization refused, by full method.
	denied metric.Int64Counter
	// setAside counts the logs set aside rather than taken for a partition.
	setAside metric.Int64Counter
	// traffic counts produce, consume and fetch per topic (traffic.go).
	traffic *traffic

	// requestAttrs caches the attribute option of each (method, code), so a
	// call records without allocating.
	requestMu    sync.RWMutex
	requestAttrs map[requestKey]metric.RecordOption

	observeMu    sync.Mutex
	registration metric.Registration
	logs         *logCollector // the per-replica log series, with registration
}

// Sources are what the gauges read at scrape time.
type Sources struct {
	// Replicas is the replica manager's snapshot (core.ReplicaManager.MetricsSnapshot).
	Replicas func() core.MetricsSnapshot
	// FetcherMaxLag is the follower fetchers' largest lag
	// (fetcher.Manager.MaxLag); nil reports 0.
	FetcherMaxLag func() int64
	// NoLogSeries leaves the per-replica log series out (replicad
	// --metrics-log-series=false): four series per partition hosted, and
	// the two follower lag series per partition followed.
	NoLogSeries bool
	// FollowerLags is the lag of each partition this broker follows
	// (fetcher.Manager.Lags); nil: none.
	FollowerLags func() []FollowerLag
}

// FollowerLag is how far one followed partition is behind its leader.
type FollowerLag struct {
	Topic     string
	Partition int32
	Records   int64
	Seconds   float64
}

// New builds the provider, the exporter and the counters and histograms.
// The gauges come with Observe.
func New() (*Metrics, error) {
	m := &Metrics{requestAttrs: make(map[requestKey]metric.RecordOption)}
	var err error
	if m.registry, m.provider, err = newPipeline(); err != nil {
		return nil, err
	}
	m.meter = m.provider.Meter(meterName)
	if err := m.createInstruments(); err != nil {
		_ = m.provider.Shutdown(context.Background())
		return nil, err
	}
	if m.traffic, err = newTraffic(m.meter); err != nil {
		_ = m.provider.Shutdown(context.Background())
		return nil, fmt.Errorf("metrics: create traffic counters: %w", err)
	}
	return m, nil
}

func (m *Metrics) createInstruments() error {
	var errs [6]error
	m.isrShrinks, errs[0] = m.meter.Int64Counter("replicad_isr_shrinks_total",
		metric.WithDescription("ISR shrinks this broker proposed as leader and saw committed."))
	m.isrExpands, errs[1] = m.meter.Int64Counter("replicad_isr_expands_total",
		metric.WithDescription("ISR expansions this broker proposed as leader and saw committed."))
	m.hwCheckpoint, errs[2] = m.meter.Float64Histogram("replicad_hw_checkpoint_duration_seconds",
		metric.WithDescription("Time to write the high-watermark checkpoint of every online log dir."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(checkpointBuckets...))
	m.requests, errs[3] = m.meter.Float64Histogram("replicad_request_duration_seconds",
		metric.WithDescription("Time to serve a unary gRPC call, by full method and status code."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(requestBuckets...))
	m.denied, errs[4] = m.meter.Int64Counter("replicad_authorization_denied_total",
		metric.WithDescription("Calls refused by authorization (PermissionDenied or Unauthenticated), by full method."))
	m.setAside, errs[5] = m.meter.Int64Counter("replicad_logs_set_aside_total",
		metric.WithDescription("Logs set aside (renamed *-stray, kept, never served) rather than taken for a partition they could not be proven to belong to."))
	if err := errors.Join(errs[:]...); err != nil {
		return fmt.Errorf("metrics: create instruments: %w", err)
	}
	// Exported at 0 from the start: rate() and increase() need the
	// series before the first shrink, and "no shrink yet" reads as 0.
	m.isrShrinks.Add(context.Background(), 0)
	m.isrExpands.Add(context.Background(), 0)
	m.setAside.Add(context.Background(), 0)
	return nil
}

// gauges are the instruments observed at scrape time.
type gauges struct {
	partitions, leaders, underReplicated, offline, fetcherMaxLag metric.Int64ObservableGauge

	topicMu    sync.Mutex
	topicAttrs map[string]metric.MeasurementOption // by topic, of the last scrape

	topicLeaderPartitions, topicUnderReplicated, topicLeaderLEO, topicLeaderBytes metric.Int64ObservableGauge
	topicFollowerPartitions                                                       metric.Int64ObservableGauge

	// The replication throttle (core.ThrottleStats).
	throttleRate                   metric.Int64ObservableGauge
	throttledBytes, throttledReads metric.Int64ObservableCounter

	// The cache of open log files (core/log.FileCache, --max-open-files).
	openFiles, openFilesCapacity metric.Int64ObservableGauge
	fileEvictions, fileReopens   metric.Int64ObservableCounter

	// Idempotent producers' state (issue 21).
	producerIDs metric.Int64ObservableGauge
}

// Observe registers the gauges, read from src at each scrape. A second call
// replaces the first one's sources.
func (m *Metrics) Observe(src Sources) error {
	if m == nil {
		return nil
	}
	if src.Replicas == nil {
		return errors.New("metrics: Observe without a replica snapshot")
	}
	g := &gauges{}
	var errs []error
	gauge := func(dst *metric.Int64ObservableGauge, name, desc string) {
		var err error
		*dst, err = m.meter.Int64ObservableGauge(name, metric.WithDescription(desc))
		errs = append(errs, err)
	}
	gauge(&g.partitions, "replicad_partitions", "Partitions hosted by this broker, offline ones included.")
	gauge(&g.leaders, "replicad_leaders", "Partitions this broker leads.")
	gauge(&g.underReplicated, "replicad_under_replicated_partitions", "Partitions this broker leads whose ISR is smaller than their replica set.")
	gauge(&g.offline, "replicad_offline_partitions", "Hosted partitions that cannot be served: in an offline log dir, or left without a leader.")
	gauge(&g.fetcherMaxLag, "replicad_fetcher_max_lag", "Largest lag, in messages, of a partition this broker follows.")
	gauge(&g.topicLeaderPartitions, "replicad_topic_leader_partitions", "Partitions of the topic this broker leads.")
	gauge(&g.topicUnderReplicated, "replicad_topic_under_replicated_partitions", "Partitions of the topic this broker leads whose ISR is smaller than their replica set.")
	gauge(&g.topicLeaderLEO, "replicad_topic_leader_log_end_offset", "Sum of the log end offsets of the topic's partitions this broker leads.")
	gauge(&g.topicLeaderBytes, "replicad_topic_leader_log_size_bytes", "Bytes of the logs of the topic's partitions this broker leads.")
	gauge(&g.topicFollowerPartitions, "replicad_topic_follower_partitions", "Partitions of the topic this broker follows.")
	gauge(&g.throttleRate, "replicad_replication_throttle_bytes_per_second", "The replication throttle in force: bytes/s a leader sends to replicas being added by a reassignment, outside the ISR (0: none).")
	counter := func(dst *metric.Int64ObservableCounter, name, desc string) {
		var err error
		*dst, err = m.meter.Int64ObservableCounter(name, metric.WithDescription(desc))
		errs = append(errs, err)
	}
	counter(&g.throttledBytes, "replicad_replication_throttled_bytes_total", "Bytes sent, as leader, to replicas being added (outside the ISR) under the replication throttle.")
	counter(&g.throttledReads, "replicad_replication_throttled_reads_total", "Partition reads of replicas being added (outside the ISR) that the replication throttle left without records.")
	gauge(&g.openFiles, "replicad_log_open_files", "Log segment and index files open now (the --max-open-files cache).")
	gauge(&g.openFilesCapacity, "replicad_log_open_files_capacity", "The --max-open-files cache's capacity (0: unbounded).")
	counter(&g.fileEvictions, "replicad_log_file_evictions_total", "Log files closed to make room in the --max-open-files cache (a high rate means reopens on the hot path: raise the limit).")
	counter(&g.fileReopens, "replicad_log_file_reopens_total", "Log files reopened on use after the cache closed them.")
	gauge(&g.producerIDs, "replicad_producer_ids", "Idempotent producer IDs this broker holds state for, summed over its partitions, leaders and followers (each bounded by --max-producers-per-partition, forgotten after --producer-id-expiration).")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("metrics: create gauges: %w", err)
	}
	reg, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		g.observe(o, src)
		return nil
	}, g.partitions, g.leaders, g.underReplicated, g.offline, g.fetcherMaxLag,
		g.topicLeaderPartitions, g.topicUnderReplicated, g.topicLeaderLEO, g.topicLeaderBytes,
		g.topicFollowerPartitions, g.throttleRate, g.throttledBytes, g.throttledReads,
		g.openFiles, g.openFilesCapacity, g.fileEvictions, g.fileReopens, g.producerIDs)
	if err != nil {
		return fmt.Errorf("metrics: register gauge callback: %w", err)
	}
	var logs *logCollector
	if !src.NoLogSeries {
		logs = newLogCollector(src.Replicas, src.FollowerLags)
	}
	m.observeMu.Lock()
	old, oldLogs := m.registration, m.logs
	if oldLogs != nil {
		m.registry.Unregister(oldLogs)
	}
	if logs != nil {
		if err := m.registry.Register(logs); err != nil {
			m.observeMu.Unlock()
			return fmt.Errorf("metrics: register log series: %w", err)
		}
	}
	m.registration, m.logs = reg, logs
	m.observeMu.Unlock()
	if old != nil {
		return old.Unregister()
	}
	return nil
}

// observe takes one snapshot and reports every gauge from it. A role's
// per-topic series are observed only for the topics with a partition in that
// role: the SDK exports only what the last callback observed.
func (g *gauges) observe(o metric.Observer, src Sources) {
	s := src.Replicas()
	o.ObserveInt64(g.partitions, int64(s.Partitions))
	o.ObserveInt64(g.leaders, int64(s.Leaders))
	o.ObserveInt64(g.underReplicated, int64(s.UnderReplicated))
	o.ObserveInt64(g.offline, int64(s.Offline))
	var lag int64
	if src.FetcherMaxLag != nil {
		lag = src.FetcherMaxLag()
	}
	o.ObserveInt64(g.fetcherMaxLag, lag)
	o.ObserveInt64(g.throttleRate, s.Throttle.BytesPerSec)
	o.ObserveInt64(g.throttledBytes, s.Throttle.ThrottledBytes)
	o.ObserveInt64(g.throttledReads, s.Throttle.ThrottledReads)
	o.ObserveInt64(g.openFiles, int64(s.FileCache.Open))
	o.ObserveInt64(g.openFilesCapacity, int64(s.FileCache.Capacity))
	o.ObserveInt64(g.fileEvictions, s.FileCache.Evictions)
	o.ObserveInt64(g.fileReopens, s.FileCache.Reopens)
	o.ObserveInt64(g.producerIDs, int64(s.ProducerIDs))
	g.topicMu.Lock()
	defer g.topicMu.Unlock()
	// The attribute set of each topic is kept from one scrape to the next
	// (a topic gone from the snapshot leaves the cache with it).
	prev := g.topicAttrs
	g.topicAttrs = make(map[string]metric.MeasurementOption, len(s.Topics))
	for i := range s.Topics {
		t := &s.Topics[i]
		attrs, ok := prev[t.Topic]
		if !ok {
			attrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", t.Topic)))
		}
		g.topicAttrs[t.Topic] = attrs
		if t.LeaderPartitions > 0 {
			o.ObserveInt64(g.topicLeaderPartitions, int64(t.LeaderPartitions), attrs)
			o.ObserveInt64(g.topicUnderReplicated, int64(t.UnderReplicated), attrs)
			o.ObserveInt64(g.topicLeaderLEO, t.LeaderLogEndOffset, attrs)
			o.ObserveInt64(g.topicLeaderBytes, t.LeaderLogBytes, attrs)
		}
		if t.FollowerPartitions > 0 {
			o.ObserveInt64(g.topicFollowerPartitions, int64(t.FollowerPartitions), attrs)
		}
	}
}

// Handler serves the registry in the Prometheus text format (gzipped when
// the scraper accepts it). A collection error still serves what was gathered.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Shutdown stops the provider; later scrapes are empty of replicad metrics.
func (m *Metrics) Shutdown(ctx context.Context) error {
	if m == nil {
		return nil
	}
	if err := m.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("metrics shutdown: %w", err)
	}
	return nil
}

var _ core.MetricsRecorder = (*Metrics)(nil)

// IsrShrunk implements core.MetricsRecorder.
func (m *Metrics) IsrShrunk(tp.TopicPartition) {
	if m != nil {
		m.isrShrinks.Add(context.Background(), 1)
	}
}

// AuthorizationDenied counts one call refused by authorization (the
// authz.Enforcer's Denied hook).
func (m *Metrics) AuthorizationDenied(fullMethod string) {
	if m != nil {
		m.denied.Add(context.Background(), 1, metric.WithAttributes(attribute.String("method", fullMethod)))
	}
}

// IsrExpanded implements core.MetricsRecorder.
func (m *Metrics) IsrExpanded(tp.TopicPartition) {
	if m != nil {
		m.isrExpands.Add(context.Background(), 1)
	}
}

// LogSetAside implements core.MetricsRecorder.
func (m *Metrics) LogSetAside(tp.TopicPartition) {
	if m != nil {
		m.setAside.Add(context.Background(), 1)
	}
}

// HighWatermarkCheckpointed implements core.MetricsRecorder.
func (m *Metrics) HighWatermarkCheckpointed(took time.Duration) {
	if m != nil {
		m.hwCheckpoint.Record(context.Background(), took.Seconds())
	}
}
