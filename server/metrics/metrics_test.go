package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// scrape is one /metrics answer: the raw text, and each sample's value by
// its series ("name" or `name{label="v",...}` as exported).
type scrape struct {
	text    string
	samples map[string]float64
}

func (s scrape) value(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := s.samples[series]
	if !ok {
		t.Fatalf("no series %s in the scrape:\n%s", series, s.text)
	}
	return v
}

func (s scrape) has(series string) bool {
	_, ok := s.samples[series]
	return ok
}

func parseScrape(t testing.TB, text string) scrape {
	t.Helper()
	s := scrape{text: text, samples: map[string]float64{}}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad sample line %q: %v", line, err)
		}
		s.samples[line[:i]] = v
	}
	return s
}

// get scrapes url/metrics over HTTP and checks it is Prometheus text.
func get(t testing.TB, url string) scrape {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("status %d, content type %q:\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return parseScrape(t, string(body))
}

func serve(t *testing.T, m *Metrics) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func newMetrics(t testing.TB) *Metrics {
	t.Helper()
	m, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

// A scrape over HTTP carries SPEC's names exactly (no unit or _total suffix
// added, no otel_scope labels, no target_info), with the gauges read from the
// sources at scrape time, the counters and both histograms.
func TestScrapeExportsSpecNames(t *testing.T) {
	m := newMetrics(t)
	snap := core.MetricsSnapshot{Partitions: 7, Leaders: 4, UnderReplicated: 2, Offline: 1, Topics: []core.TopicMetrics{
		{Topic: "orders", LeaderPartitions: 4, UnderReplicated: 2, LeaderLogEndOffset: 100, LeaderLogBytes: 4096, FollowerPartitions: 1},
		{Topic: "events", FollowerPartitions: 2},
	}, Throttle: core.ThrottleStats{BytesPerSec: 1 << 20, ThrottledBytes: 5000, ThrottledReads: 3},
		FileCache: log.FileCacheStats{Capacity: 10000, Open: 9000, Evictions: 12, Reopens: 11}, ProducerIDs: 17}
	if err := m.Observe(Sources{Replicas: func() core.MetricsSnapshot { return snap }, FetcherMaxLag: func() int64 { return 42 }}); err != nil {
		t.Fatal(err)
	}
	m.IsrShrunk(tp.TopicPartition{Topic: "orders"})
	m.IsrShrunk(tp.TopicPartition{Topic: "orders"})
	m.IsrExpanded(tp.TopicPartition{Topic: "orders"})
	m.HighWatermarkCheckpointed(3 * time.Millisecond)
	intercept := m.UnaryServerInterceptor()
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	fail := func(context.Context, any) (any, error) { return nil, status.Error(codes.NotFound, "no") }
	info := &grpc.UnaryServerInfo{FullMethod: "/replicad.v1.LogService/Produce"}
	for _, h := range []grpc.UnaryHandler{ok, ok, fail} {
		_, _ = intercept(context.Background(), nil, info, h)
	}
	// A handler that panics (recovery outside turns it into Internal) is
	// counted as Internal, and the panic goes on to the recovery.
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the interceptor swallowed the panic")
			}
		}()
		_, _ = intercept(context.Background(), nil, info, func(context.Context, any) (any, error) { panic("boom") })
	}()

	s := get(t, serve(t, m))
	for series, want := range map[string]float64{
		"replicad_partitions":                                         7,
		"replicad_leaders":                                            4,
		"replicad_under_replicated_partitions":                        2,
		"replicad_offline_partitions":                                 1,
		"replicad_fetcher_max_lag":                                    42,
		"replicad_replication_throttle_bytes_per_second":              1 << 20,
		"replicad_replication_throttled_bytes_total":                  5000,
		"replicad_replication_throttled_reads_total":                  3,
		"replicad_log_open_files":                                     9000,
		"replicad_log_open_files_capacity":                            10000,
		"replicad_log_file_evictions_total":                           12,
		"replicad_log_file_reopens_total":                             11,
		"replicad_producer_ids":                                       17,
		"replicad_isr_shrinks_total":                                  2,
		"replicad_isr_expands_total":                                  1,
		"replicad_hw_checkpoint_duration_seconds_count":               1,
		`replicad_hw_checkpoint_duration_seconds_bucket{le="0.0025"}`: 0,
		`replicad_hw_checkpoint_duration_seconds_bucket{le="0.005"}`:  1,
		`replicad_request_duration_seconds_count{code="OK",method="/replicad.v1.LogService/Produce"}`:       2,
		`replicad_request_duration_seconds_count{code="NotFound",method="/replicad.v1.LogService/Produce"}`: 1,
		`replicad_request_duration_seconds_count{code="Internal",method="/replicad.v1.LogService/Produce"}`: 1,
		`replicad_topic_leader_partitions{topic="orders"}`:                                                  4,
		`replicad_topic_under_replicated_partitions{topic="orders"}`:                                        2,
		`replicad_topic_leader_log_end_offset{topic="orders"}`:                                              100,
		`replicad_topic_leader_log_size_bytes{topic="orders"}`:                                              4096,
		`replicad_topic_follower_partitions{topic="orders"}`:                                                1,
		`replicad_topic_follower_partitions{topic="events"}`:                                                2,
	} {
		if got := s.value(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// events is led nowhere here: no leader-role series for it.
	for _, series := range []string{`replicad_topic_leader_partitions{topic="events"}`, `replicad_topic_under_replicated_partitions{topic="events"}`} {
		if s.has(series) {
			t.Errorf("%s exported for a topic this broker does not lead", series)
		}
	}
	for _, unwanted := range []string{"otel_scope", "target_info", "replicad_isr_shrinks_total_total", "_seconds_seconds"} {
		if strings.Contains(s.text, unwanted) {
			t.Errorf("scrape contains %q:\n%s", unwanted, s.text)
		}
	}
	for _, typ := range []string{"# TYPE replicad_isr_shrinks_total counter", "# TYPE replicad_under_replicated_partitions gauge",
		"# TYPE replicad_request_duration_seconds histogram", "# TYPE replicad_hw_checkpoint_duration_seconds histogram"} {
		if !strings.Contains(s.text, typ) {
			t.Errorf("scrape lacks %q", typ)
		}
	}
	if !s.has("go_goroutines") {
		t.Error("no Go runtime metrics")
	}
}

// A nil *Metrics (metrics off) is a working no-op recorder and interceptor.
func TestNilMetricsIsNoOp(t *testing.T) {
	var m *Metrics
	m.IsrShrunk(tp.TopicPartition{})
	m.IsrExpanded(tp.TopicPartition{})
	m.HighWatermarkCheckpointed(time.Second)
	if err := m.Observe(Sources{}); err != nil {
		t.Fatal(err)
	}
	resp, err := m.UnaryServerInterceptor()(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/x/Y"},
		func(_ context.Context, req any) (any, error) { return req, nil })
	if resp != "req" || err != nil {
		t.Fatalf("interceptor: %v %v", resp, err)
	}
	if err := m.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// rmHarness is a real replica manager (broker 1, brokers 2 and 3 alive)
// whose metrics are served over HTTP.
type rmHarness struct {
	t   testing.TB
	rm  *core.ReplicaManager
	url string
}

func newRMHarness(t testing.TB, m *Metrics) *rmHarness {
	t.Helper()
	rm, err := core.NewReplicaManager(core.Config{BrokerID: 1, LogDirs: []string{t.TempDir()}, Clock: clock.Real{},
		Logger: zerolog.Nop(), HWCheckpointInterval: time.Hour, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Shutdown(context.Background()) })
	if err := m.Observe(Sources{Replicas: rm.MetricsSnapshot}); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &rmHarness{t: t, rm: rm, url: srv.URL}
}

func (h *rmHarness) leaderAndIsr(states ...core.PartitionState) {
	h.t.Helper()
	resp := h.rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1,
		PartitionStates: states, LiveLeaders: []core.Broker{{ID: 2, Host: "127.0.0.1", Port: 9092}, {ID: 3, Host: "127.0.0.1", Port: 9093}}})
	for _, pe := range resp.PartitionErrors {
		if pe.Error != core.ErrNone {
			h.t.Fatalf("LeaderAndIsr %v: %v", pe.TopicPartition, pe.Error)
		}
	}
}

func partitionState(topic string, partition, leader, epoch int32, isr ...int32) core.PartitionState {
	return core.PartitionState{TopicPartition: tp.TopicPartition{Topic: topic, Partition: partition}, ControllerEpoch: 1,
		Leader: leader, LeaderEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: isr, IsNew: epoch == 1}
}

var (
	leaderSeries = []string{"replicad_topic_leader_partitions", "replicad_topic_under_replicated_partitions",
		"replicad_topic_leader_log_end_offset", "replicad_topic_leader_log_size_bytes"}
	followerSeries = []string{"replicad_topic_follower_partitions"}
)

// checkRole fails unless every per-topic series of a role is exported for
// topic (present) or none is (absent).
func checkRole(t *testing.T, s scrape, names []string, topic string, present bool) {
	t.Helper()
	for _, name := range names {
		series := fmt.Sprintf("%s{topic=%q}", name, topic)
		if s.has(series) != present {
			t.Errorf("%s exported: %v, want %v", series, s.has(series), present)
		}
	}
}

// Once LeaderAndIsr moves a topic's last partition out of a role, the
// topic's series for that role are gone from the scrape (the seed's
// KAFKA-8392 step), while its other role's series stay; a StopReplica of a
// topic's last partition removes them all. Broker-wide gauges follow.
func TestTopicSeriesRemovedWhenRoleEnds(t *testing.T) {
	h := newRMHarness(t, newMetrics(t))
	h.leaderAndIsr(
		partitionState("orders", 0, 1, 1, 1, 2, 3),
		partitionState("orders", 1, 1, 1, 1, 2), // under-replicated
		partitionState("events", 0, 2, 1, 1, 2, 3),
	)
	s := get(t, h.url)
	if s.value(t, "replicad_leaders") != 2 || s.value(t, "replicad_partitions") != 3 ||
		s.value(t, "replicad_under_replicated_partitions") != 1 {
		t.Fatalf("broker gauges wrong:\n%s", s.text)
	}
	if s.value(t, `replicad_topic_leader_partitions{topic="orders"}`) != 2 ||
		s.value(t, `replicad_topic_under_replicated_partitions{topic="orders"}`) != 1 ||
		s.value(t, `replicad_topic_follower_partitions{topic="events"}`) != 1 {
		t.Fatalf("per-topic gauges wrong:\n%s", s.text)
	}
	checkRole(t, s, followerSeries, "orders", false)
	checkRole(t, s, leaderSeries, "events", false)

	// One of orders' two led partitions moves: the role remains.
	h.leaderAndIsr(partitionState("orders", 0, 2, 2, 1, 2, 3))
	s = get(t, h.url)
	if s.value(t, `replicad_topic_leader_partitions{topic="orders"}`) != 1 || s.value(t, `replicad_topic_follower_partitions{topic="orders"}`) != 1 {
		t.Fatalf("orders after one partition moved:\n%s", s.text)
	}
	// The last one moves: orders' leader series go, its follower ones stay.
	h.leaderAndIsr(partitionState("orders", 1, 2, 2, 1, 2, 3))
	s = get(t, h.url)
	checkRole(t, s, leaderSeries, "orders", false)
	checkRole(t, s, followerSeries, "orders", true)
	if s.value(t, "replicad_leaders") != 0 || s.value(t, "replicad_under_replicated_partitions") != 0 {
		t.Fatalf("broker gauges after losing every leadership:\n%s", s.text)
	}
	// events' only partition becomes led: its follower series go.
	h.leaderAndIsr(partitionState("events", 0, 1, 2, 1, 2, 3))
	s = get(t, h.url)
	checkRole(t, s, followerSeries, "events", false)
	checkRole(t, s, leaderSeries, "events", true)
	// StopReplica of orders' partitions: nothing of orders is left.
	h.rm.StopReplicas(context.Background(), core.StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1, Partitions: []core.StopReplicaPartition{
		{TopicPartition: tp.TopicPartition{Topic: "orders", Partition: 0}, LeaderEpoch: core.NoEpoch},
		{TopicPartition: tp.TopicPartition{Topic: "orders", Partition: 1}, LeaderEpoch: core.NoEpoch},
	}})
	s = get(t, h.url)
	checkRole(t, s, followerSeries, "orders", false)
	checkRole(t, s, leaderSeries, "orders", false)
	if strings.Contains(s.text, `topic="orders"`) {
		t.Fatalf("orders still exported after StopReplica:\n%s", s.text)
	}
	if s.value(t, "replicad_partitions") != 1 || s.value(t, "replicad_leaders") != 1 {
		t.Fatalf("broker gauges after StopReplica:\n%s", s.text)
	}
}

// The counters and the checkpoint histogram are fed by a real replica
// manager configured with Metrics.
func TestReplicaManagerFeedsCountersAndCheckpointHistogram(t *testing.T) {
	h := newRMHarness(t, newMetrics(t))
	h.leaderAndIsr(partitionState("orders", 0, 1, 1, 1)) // ISR [1] of [1 2 3]
	// Follower 2 fetches at the leader's LEO (0): in sync, so the ISR expands.
	h.rm.FetchMessages(context.Background(), core.FetchRequest{ReplicaID: 2, BrokerEpoch: -1, Partitions: []core.FetchPartition{
		{TopicPartition: tp.TopicPartition{Topic: "orders"}, FetchOffset: 0, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}}})
	h.rm.CheckpointHighWatermarks(context.Background())
	s := get(t, h.url)
	if s.value(t, "replicad_isr_expands_total") != 1 || s.value(t, "replicad_isr_shrinks_total") != 0 {
		t.Fatalf("ISR counters after one expansion:\n%s", s.text)
	}
	if s.value(t, "replicad_hw_checkpoint_duration_seconds_count") != 1 || s.value(t, "replicad_under_replicated_partitions") != 1 {
		t.Fatalf("checkpoint histogram or under-replication wrong:\n%s", s.text)
	}
}

// BenchmarkScrape10000 is one /metrics scrape (snapshot, OTel collection,
// Prometheus text encoding) of a broker hosting 10,000 partitions, leading
// half and following half: in 100 topics of 100 partitions, and in 10,000
// single-partition topics (the worst case for per-topic series).
func BenchmarkScrape10000(b *testing.B) {
	const n = 10_000
	for _, shape := range []struct {
		name     string
		perTopic int
	}{{"100-topics", 100}, {"10000-topics", 1}} {
		b.Run(shape.name, func(b *testing.B) {
			m := newMetrics(b)
			h := newRMHarness(b, m)
			states := make([]core.PartitionState, n)
			for i := range states {
				leader := int32(1)
				if i%2 == 1 {
					leader = 2
				}
				states[i] = partitionState(fmt.Sprintf("t%05d", i/shape.perTopic), int32(i%shape.perTopic), leader, 1, 1, 2, 3)
			}
			h.leaderAndIsr(states...)
			handler := m.Handler()
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			var size int
			b.ReportAllocs()
			cpu := startCPUTimer(b)
			for b.Loop() {
				rec := httptest.NewRecorder()
				handler.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Code)
				}
				size = rec.Body.Len()
			}
			cpu.report()
			b.ReportMetric(float64(size), "bytes/scrape")
		})
	}
	b.Run("snapshot-only", func(b *testing.B) {
		h := newRMHarness(b, newMetrics(b))
		states := make([]core.PartitionState, n)
		for i := range states {
			states[i] = partitionState(fmt.Sprintf("t%03d", i/100), int32(i%100), 1, 1, 1, 2, 3)
		}
		h.leaderAndIsr(states...)
		b.ReportAllocs()
		cpu := startCPUTimer(b)
		for b.Loop() {
			_ = h.rm.MetricsSnapshot()
		}
		cpu.report()
	})
}

// cpuTimer reports the process's CPU time per iteration ("cpu-ns/op")
// besides the wall time: on a shared, loaded machine the wall time of a
// benchmark says more about the neighbours than about the code.
type cpuTimer struct {
	b     *testing.B
	start time.Duration
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPUTimer(b *testing.B) *cpuTimer { return &cpuTimer{b: b, start: processCPU(b)} }

func (c *cpuTimer) report() {
	c.b.ReportMetric(float64(processCPU(c.b)-c.start)/float64(c.b.N), "cpu-ns/op")
}

// Scrapes run concurrently (two Prometheus servers, a curl) with the broker
// changing roles and counting ISR changes: under -race nothing they share
// may race, and every scrape is a consistent, parseable page.
func TestConcurrentScrapes(t *testing.T) {
	m := newMetrics(t)
	var gen atomic.Int64
	snap := func() core.MetricsSnapshot {
		n := gen.Add(1)
		topic := fmt.Sprintf("t%d", n%5) // topics come and go between scrapes
		return core.MetricsSnapshot{Partitions: 1, Leaders: 1, Topics: []core.TopicMetrics{{Topic: topic, LeaderPartitions: 1}}}
	}
	if err := m.Observe(Sources{Replicas: snap, FetcherMaxLag: func() int64 { return 1 }}); err != nil {
		t.Fatal(err)
	}
	url := serve(t, m)
	intercept := m.UnaryServerInterceptor()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				// Not get(): t.Fatal belongs to the test's goroutine.
				resp, err := http.Get(url + "/metrics")
				if err != nil {
					t.Errorf("scrape %d/%d: %v", w, i, err)
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\nreplicad_partitions 1\n") {
					t.Errorf("scrape %d/%d: %v %s:\n%s", w, i, err, resp.Status, body)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 500 {
			m.IsrShrunk(tp.TopicPartition{Topic: fmt.Sprintf("t%d", i%7)})
			_, _ = intercept(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: fmt.Sprintf("/m/%d", i%3)},
				func(context.Context, any) (any, error) { return nil, nil })
		}
	}()
	wg.Wait()
	if got := get(t, url).value(t, "replicad_isr_shrinks_total"); got != 500 {
		t.Errorf("replicad_isr_shrinks_total = %v after 500 shrinks", got)
	}
}

// The per-replica log series follow a real log: its size, log start and end,
// and the segments a DeleteRecords deleted.
func TestLogSeriesFollowTheLog(t *testing.T) {
	h := newRMHarness(t, newMetrics(t))
	orders := tp.TopicPartition{Topic: "orders", Partition: 0}
	h.leaderAndIsr(core.PartitionState{TopicPartition: orders, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1,
		Replicas: []int32{1}, ISR: []int32{1}, IsNew: true, TopicConfigVersion: 1, TopicConfigs: map[string]string{"segment.bytes": "1024"}})
	for i := range 30 {
		r := h.rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: orders, Acks: 1, Timeout: time.Second,
			Records: []record.Record{{Value: []byte(fmt.Sprintf("%02d-%s", i, strings.Repeat("x", 100)))}}})
		if r.Error != core.ErrNone {
			t.Fatalf("produce: %v", r.Error)
		}
	}
	series := func(name string) string { return name + `{partition="0",topic="orders"}` }
	s := get(t, h.url)
	before := s.value(t, series("replicad_log_size_bytes"))
	if s.value(t, series("replicad_log_end_offset")) != 30 || s.value(t, series("replicad_log_start_offset")) != 0 ||
		before <= 0 || s.value(t, series("replicad_log_segments_deleted_total")) != 0 {
		t.Fatalf("before DeleteRecords:\n%s", s.text)
	}
	resp := h.rm.DeleteRecords(context.Background(), core.DeleteRecordsRequest{Partitions: []core.DeleteRecordsPartition{{TopicPartition: orders, Offset: 20}}})
	if resp.Partitions[0].Error != core.ErrNone {
		t.Fatalf("DeleteRecords: %v", resp.Partitions[0].Error)
	}
	s = get(t, h.url)
	if s.value(t, series("replicad_log_start_offset")) != 20 || s.value(t, series("replicad_log_segments_deleted_total")) < 1 ||
		s.value(t, series("replicad_log_size_bytes")) >= before {
		t.Fatalf("after DeleteRecords to 20:\n%s", s.text)
	}
	if !strings.Contains(s.text, "# TYPE replicad_log_segments_deleted_total counter") {
		t.Error("replicad_log_segments_deleted_total is not a counter")
	}
}

// NoLogSeries leaves the per-replica log series out, and a second Observe
// replaces the first's (the series come back with it).
func TestNoLogSeries(t *testing.T) {
	m := newMetrics(t)
	snap := core.MetricsSnapshot{Logs: []core.LogMetrics{{TopicPartition: tp.TopicPartition{Topic: "orders", Partition: 3}, SizeBytes: 10}}}
	if err := m.Observe(Sources{Replicas: func() core.MetricsSnapshot { return snap }, NoLogSeries: true}); err != nil {
		t.Fatal(err)
	}
	url := serve(t, m)
	if s := get(t, url); strings.Contains(s.text, "replicad_log_size_bytes") {
		t.Fatalf("log series exported with NoLogSeries:\n%s", s.text)
	}
	lags := func() []FollowerLag { return []FollowerLag{{Topic: "events", Partition: 1, Records: 42, Seconds: 1.5}} }
	if err := m.Observe(Sources{Replicas: func() core.MetricsSnapshot { return snap }, FollowerLags: lags}); err != nil {
		t.Fatal(err)
	}
	s := get(t, url)
	if s.value(t, `replicad_log_size_bytes{partition="3",topic="orders"}`) != 10 ||
		s.value(t, `replicad_follower_lag_records{partition="1",topic="events"}`) != 42 ||
		s.value(t, `replicad_follower_lag_seconds{partition="1",topic="events"}`) != 1.5 {
		t.Fatalf("log or lag series missing:\n%s", s.text)
	}
}
