package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replicad/replicad/core"
)

// logCollector exports the per-replica log series (Kafka's kafka.log:type=Log
// Size, LogStartOffset, LogEndOffset, and the segments deleted) straight to
// the Prometheus registry, not through the OpenTelemetry SDK: a broker
// hosting 10,000 partitions has 40,000 of them, and the SDK's aggregation
// of observable instruments costs about 50 times more per series than a
// constant metric (BenchmarkScrape10000 measured it). The series of a
// replica exist while the broker hosts it online; they go with it.
type logCollector struct {
	snapshot                  func() core.MetricsSnapshot
	lags                      func() []FollowerLag
	size, start, end, deleted *prometheus.Desc
	lagRecords, lagSeconds    *prometheus.Desc
}

func newLogCollector(snapshot func() core.MetricsSnapshot, lags func() []FollowerLag) *logCollector {
	labels := []string{"topic", "partition"}
	return &logCollector{
		snapshot: snapshot,
		lags:     lags,
		lagRecords: prometheus.NewDesc("replicad_follower_lag_records",
			"How many records this follower was behind its leader's log end at the last fetch answer, per partition followed.", labels, nil),
		lagSeconds: prometheus.NewDesc("replicad_follower_lag_seconds",
			"How long since a fetch answer last found this follower caught up (0 when it is), per partition followed.", labels, nil),
		size:  prometheus.NewDesc("replicad_log_size_bytes", "Bytes of the replica's log segments (Kafka's Log Size), per partition hosted here.", labels, nil),
		start: prometheus.NewDesc("replicad_log_start_offset", "The replica's log start offset (Kafka's LogStartOffset).", labels, nil),
		end:   prometheus.NewDesc("replicad_log_end_offset", "The replica's log end offset (Kafka's LogEndOffset).", labels, nil),
		deleted: prometheus.NewDesc("replicad_log_segments_deleted_total",
			"Segments deleted below the replica's log start (retention, DeleteRecords, following the leader) since its log was opened.", labels, nil),
	}
}

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.size
	ch <- c.start
	ch <- c.end
	ch <- c.deleted
	ch <- c.lagRecords
	ch <- c.lagSeconds
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.snapshot().Logs {
		topic, partition := l.TopicPartition.Topic, strconv.Itoa(int(l.TopicPartition.Partition))
		ch <- prometheus.MustNewConstMetric(c.size, prometheus.GaugeValue, float64(l.SizeBytes), topic, partition)
		ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(l.LogStartOffset), topic, partition)
		ch <- prometheus.MustNewConstMetric(c.end, prometheus.GaugeValue, float64(l.LogEndOffset), topic, partition)
		ch <- prometheus.MustNewConstMetric(c.deleted, prometheus.CounterValue, float64(l.SegmentsDeleted), topic, partition)
	}
	if c.lags == nil {
		return
	}
	for _, l := range c.lags() {
		partition := strconv.Itoa(int(l.Partition))
		ch <- prometheus.MustNewConstMetric(c.lagRecords, prometheus.GaugeValue, float64(l.Records), l.Topic, partition)
		ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, l.Seconds, l.Topic, partition)
	}
}
