package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/replicad/replicad/controller"
)

// storeWriteBuckets are the store write latency buckets, in seconds: a
// bbolt write fsyncs (a millisecond or more), an etcd write goes through a
// Raft round, and a write stuck behind an etcd election takes seconds.
var storeWriteBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// ControllerMetrics is a controller daemon's metrics: the store write
// histogram and error counter (fed by the Store wrapper, storetiming.go),
// and the gauges and counters read from controller.MetricsSnapshot at each
// scrape. Its methods are safe for concurrent use, and for a nil
// *ControllerMetrics (they then do nothing, and Store returns the store
// unwrapped).
type ControllerMetrics struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider

	storeWrites      metric.Float64Histogram
	storeWriteErrors metric.Int64Counter
	// opAttrs is the attribute option of each store operation, made once.
	opAttrs map[string]metric.MeasurementOption

	observeMu sync.Mutex
	collector *controllerCollector
}

// NewController builds a controller's metrics; the gauges come with Observe.
func NewController() (*ControllerMetrics, error) {
	m := &ControllerMetrics{opAttrs: make(map[string]metric.MeasurementOption, len(storeWriteOps))}
	var err error
	if m.registry, m.provider, err = newPipeline(); err != nil {
		return nil, err
	}
	meter := m.provider.Meter(meterName)
	var errs [2]error
	m.storeWrites, errs[0] = meter.Float64Histogram("replicad_controller_store_write_duration_seconds",
		metric.WithDescription("Time of one write to the metadata store (bbolt or etcd), failed ones included, by operation."),
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(storeWriteBuckets...))
	m.storeWriteErrors, errs[1] = meter.Int64Counter("replicad_controller_store_write_errors_total",
		metric.WithDescription("Writes to the metadata store that failed, by operation (a compare-and-set conflict or a lost election included)."))
	if err := errors.Join(errs[:]...); err != nil {
		_ = m.provider.Shutdown(context.Background())
		return nil, fmt.Errorf("metrics: create controller instruments: %w", err)
	}
	for _, op := range storeWriteOps {
		m.opAttrs[op] = metric.WithAttributes(opAttr(op))
		// Exported at 0 from the start, so that rate() has every series
		// before the first failure.
		m.storeWriteErrors.Add(context.Background(), 0, m.opAttrs[op])
	}
	return m, nil
}

// Observe registers the snapshot-read series: snapshot is called once per
// scrape (controller.Controller.MetricsSnapshot). A second call replaces
// the first.
func (m *ControllerMetrics) Observe(snapshot func() controller.MetricsSnapshot) error {
	if m == nil {
		return nil
	}
	if snapshot == nil {
		return errors.New("metrics: Observe without a controller snapshot")
	}
	c := newControllerCollector(snapshot)
	m.observeMu.Lock()
	defer m.observeMu.Unlock()
	if m.collector != nil {
		m.registry.Unregister(m.collector)
	}
	if err := m.registry.Register(c); err != nil {
		return fmt.Errorf("metrics: register controller series: %w", err)
	}
	m.collector = c
	return nil
}

// Handler serves the registry in the Prometheus text format.
func (m *ControllerMetrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Shutdown stops the provider.
func (m *ControllerMetrics) Shutdown(ctx context.Context) error {
	if m == nil {
		return nil
	}
	if err := m.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("metrics shutdown: %w", err)
	}
	return nil
}

// controllerCollector exports the snapshot's figures as constant metrics,
// like logCollector: one snapshot per scrape feeds every series, and the
// per-broker series of a broker go with its registration.
type controllerCollector struct {
	snapshot func() controller.MetricsSnapshot

	active, epoch                                        *prometheus.Desc
	brokersRegistered, brokersFenced                     *prometheus.Desc
	partitions, offline, leaderless, underMinIsr, underR *prometheus.Desc
	imbalance                                            *prometheus.Desc
	stateChanges, leaderChanges                          *prometheus.Desc
	storeResyncs, partitionsRepaired                     *prometheus.Desc
	brokerFenced, brokerLeaders, brokerPreferred         *prometheus.Desc
	brokerNotLed, brokerQueue                            *prometheus.Desc
}

func newControllerCollector(snapshot func() controller.MetricsSnapshot) *controllerCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	const active = " Exported by the active controller only."
	return &controllerCollector{
		snapshot:          snapshot,
		active:            d("replicad_controller_active", "1 while this controller is the active one, 0 on a standby."),
		epoch:             d("replicad_controller_epoch", "The controller epoch of this controller's current term (of its last one on a standby)."),
		brokersRegistered: d("replicad_controller_registered_brokers", "Registered brokers, fenced ones included."+active),
		brokersFenced:     d("replicad_controller_fenced_brokers", "Registered brokers whose session expired: they lead nothing and join no ISR."+active),
		partitions:        d("replicad_controller_partitions", "Partitions of every topic."+active),
		offline: d("replicad_controller_offline_partitions",
			"Partitions without a serving leader: leaderless, or led by a fenced broker or from an offline replica."+active),
		leaderless:  d("replicad_controller_leaderless_partitions", "Partitions with no leader (no live ISR member, unclean election off)."+active),
		underMinIsr: d("replicad_controller_under_min_isr_partitions", "Partitions whose ISR is smaller than their min.insync.replicas: acks=all produces fail."+active),
		underR:      d("replicad_controller_under_replicated_partitions", "Partitions whose ISR is smaller than their replica set."+active),
		imbalance: d("replicad_controller_preferred_leader_imbalance_partitions",
			"Partitions not led by their preferred replica (the first): Kafka's preferred replica imbalance count."+active),
		stateChanges: d("replicad_controller_partition_state_changes_total",
			"Partition states this process committed: created partitions, elections, ISR changes, reassignment steps."),
		leaderChanges: d("replicad_controller_leader_changes_total", "Committed partition states that gave the partition another leader (or none)."),
		storeResyncs: d("replicad_controller_store_resyncs_total",
			"Re-reads of the store after a write that conflicted or whose outcome was unknown (it may have landed)."),
		partitionsRepaired: d("replicad_controller_partitions_repaired_total",
			"Partition states such a re-read found the controller's memory behind on (a write that landed unanswered), taken and re-announced."),
		brokerFenced:  d("replicad_controller_broker_fenced", "1 if the broker is fenced, 0 if its session is live."+active, "broker"),
		brokerLeaders: d("replicad_controller_broker_leader_partitions", "Partitions the broker leads."+active, "broker"),
		brokerPreferred: d("replicad_controller_broker_preferred_partitions",
			"Partitions the broker is the preferred leader (first replica) of."+active, "broker"),
		brokerNotLed: d("replicad_controller_broker_preferred_not_led_partitions",
			"Partitions the broker is the preferred leader of that another broker (or nobody) leads: its leader imbalance is this over preferred."+active, "broker"),
		brokerQueue: d("replicad_controller_broker_queue_depth",
			"Partitions (or bare UpdateMetadata requests) waiting in the controller's queue to the broker, the one in flight included."+active, "broker"),
	}
}

func (c *controllerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.active, c.epoch, c.brokersRegistered, c.brokersFenced, c.partitions,
		c.offline, c.leaderless, c.underMinIsr, c.underR, c.imbalance, c.stateChanges, c.leaderChanges,
		c.storeResyncs, c.partitionsRepaired, c.brokerFenced, c.brokerLeaders, c.brokerPreferred, c.brokerNotLed, c.brokerQueue} {
		ch <- d
	}
}

func (c *controllerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	active := 0
	if s.Active {
		active = 1
	}
	gauge(c.active, active)
	gauge(c.epoch, int(s.Epoch))
	ch <- prometheus.MustNewConstMetric(c.stateChanges, prometheus.CounterValue, float64(s.PartitionStateChanges))
	ch <- prometheus.MustNewConstMetric(c.leaderChanges, prometheus.CounterValue, float64(s.LeaderChanges))
	ch <- prometheus.MustNewConstMetric(c.storeResyncs, prometheus.CounterValue, float64(s.StoreResyncs))
	ch <- prometheus.MustNewConstMetric(c.partitionsRepaired, prometheus.CounterValue, float64(s.PartitionsRepaired))
	if !s.Active {
		// A standby's view of the cluster is empty, not zero: a sum over
		// every controller stays the active one's.
		return
	}
	gauge(c.brokersRegistered, s.BrokersRegistered)
	gauge(c.brokersFenced, s.BrokersFenced)
	gauge(c.partitions, s.Partitions)
	gauge(c.offline, s.Offline)
	gauge(c.leaderless, s.Leaderless)
	gauge(c.underMinIsr, s.UnderMinIsr)
	gauge(c.underR, s.UnderReplicated)
	gauge(c.imbalance, s.PreferredImbalance)
	for _, b := range s.Brokers {
		id := strconv.Itoa(int(b.ID))
		fenced := 0
		if b.Fenced {
			fenced = 1
		}
		gauge(c.brokerFenced, fenced, id)
		gauge(c.brokerLeaders, b.Leaders, id)
		gauge(c.brokerPreferred, b.Preferred, id)
		gauge(c.brokerNotLed, b.PreferredNotLed, id)
		gauge(c.brokerQueue, b.QueueDepth, id)
	}
}
