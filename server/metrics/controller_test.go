package metrics

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/controller"
	"github.com/replicad/replicad/controller/store"
)

func newControllerMetrics(t testing.TB) *ControllerMetrics {
	t.Helper()
	m, err := NewController()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown(context.Background()) })
	return m
}

// serveController serves m with Serve, as the daemon does, on a free port.
func serveController(t *testing.T, m *ControllerMetrics) string {
	t.Helper()
	srv, err := Serve("127.0.0.1:0", m.Handler(), zerolog.Nop(), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return "http://" + srv.Addr()
}

// TestControllerScrape: every figure of the snapshot is exported under its
// replicad_controller_* name, read at scrape time; a standby exports only
// whether it is active, its epoch and the counters; a broker gone from the
// snapshot takes its series with it.
func TestControllerScrape(t *testing.T) {
	m := newControllerMetrics(t)
	var mu sync.Mutex
	snap := controller.MetricsSnapshot{Active: true, Epoch: 7, BrokersRegistered: 3, BrokersFenced: 1, Partitions: 12,
		Offline: 2, Leaderless: 1, UnderMinIsr: 3, UnderReplicated: 4, PreferredImbalance: 5,
		PartitionStateChanges: 40, LeaderChanges: 9, StoreResyncs: 2, PartitionsRepaired: 5,
		Brokers: []controller.BrokerMetrics{
			{ID: 1, Leaders: 8, Preferred: 4},
			{ID: 2, Leaders: 3, Preferred: 4, PreferredNotLed: 2, QueueDepth: 17},
			{ID: 3, Fenced: true, Preferred: 4, PreferredNotLed: 4},
		}}
	scrapes := 0
	if err := m.Observe(func() controller.MetricsSnapshot {
		mu.Lock()
		defer mu.Unlock()
		scrapes++
		return snap
	}); err != nil {
		t.Fatal(err)
	}
	url := serveController(t, m)
	s := get(t, url)
	for series, want := range map[string]float64{
		"replicad_controller_active":                                           1,
		"replicad_controller_epoch":                                            7,
		"replicad_controller_registered_brokers":                               3,
		"replicad_controller_fenced_brokers":                                   1,
		"replicad_controller_partitions":                                       12,
		"replicad_controller_offline_partitions":                               2,
		"replicad_controller_leaderless_partitions":                            1,
		"replicad_controller_under_min_isr_partitions":                         3,
		"replicad_controller_under_replicated_partitions":                      4,
		"replicad_controller_preferred_leader_imbalance_partitions":            5,
		"replicad_controller_partition_state_changes_total":                    40,
		"replicad_controller_leader_changes_total":                             9,
		"replicad_controller_store_resyncs_total":                              2,
		"replicad_controller_partitions_repaired_total":                        5,
		`replicad_controller_broker_fenced{broker="1"}`:                        0,
		`replicad_controller_broker_fenced{broker="3"}`:                        1,
		`replicad_controller_broker_leader_partitions{broker="1"}`:             8,
		`replicad_controller_broker_preferred_partitions{broker="2"}`:          4,
		`replicad_controller_broker_preferred_not_led_partitions{broker="2"}`:  2,
		`replicad_controller_broker_preferred_not_led_partitions{broker="3"}`:  4,
		`replicad_controller_broker_queue_depth{broker="2"}`:                   17,
		`replicad_controller_broker_queue_depth{broker="1"}`:                   0,
		`replicad_controller_store_write_errors_total{op="update_partitions"}`: 0,
	} {
		if got := s.value(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if !strings.Contains(s.text, "# TYPE replicad_controller_partition_state_changes_total counter") ||
		!strings.Contains(s.text, "# TYPE replicad_controller_offline_partitions gauge") {
		t.Errorf("types missing or wrong:\n%s", s.text)
	}
	if !s.has("go_goroutines") || !s.has("process_cpu_seconds_total") {
		t.Error("no Go runtime or process series")
	}

	// Deposed: a standby.
	mu.Lock()
	snap = controller.MetricsSnapshot{Epoch: 7, PartitionStateChanges: 41, LeaderChanges: 9}
	mu.Unlock()
	s = get(t, url)
	if s.value(t, "replicad_controller_active") != 0 || s.value(t, "replicad_controller_epoch") != 7 ||
		s.value(t, "replicad_controller_partition_state_changes_total") != 41 {
		t.Errorf("standby: %s", s.text)
	}
	for _, gone := range []string{"replicad_controller_offline_partitions", "replicad_controller_registered_brokers",
		`replicad_controller_broker_queue_depth{broker="2"}`} {
		if s.has(gone) {
			t.Errorf("a standby exports %s", gone)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if scrapes != 2 {
		t.Errorf("%d snapshots for 2 scrapes, want one each", scrapes)
	}
}

// slowStore takes delay for every UpdateBroker.
type slowStore struct {
	store.Store
	delay time.Duration
}

func (s slowStore) UpdateBroker(ctx context.Context, b store.Broker) error {
	time.Sleep(s.delay)
	return s.Store.UpdateBroker(ctx, b)
}

// TestStoreWritesTimed: each write is timed under its op, failed ones too
// (and counted as errors); reads are not timed; a nil ControllerMetrics
// leaves the store unwrapped.
func TestStoreWritesTimed(t *testing.T) {
	var nilMetrics *ControllerMetrics
	mem := store.NewMemory()
	if got := nilMetrics.Store(mem); got != mem {
		t.Fatalf("nil metrics wrapped the store: %T", got)
	}
	m := newControllerMetrics(t)
	const delay = 30 * time.Millisecond
	st := m.Store(slowStore{Store: mem, delay: delay})
	ctx := context.Background()
	b, err := st.RegisterBroker(ctx, store.Broker{ID: 1, Host: "h", Port: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.Fenced = true
	if err := st.UpdateBroker(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateTopic(ctx, "t", []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	// A compare-and-set on a stale partition epoch: refused, still timed.
	p, err := st.Partition(ctx, "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	next := p.Clone()
	next.PartitionEpoch = p.PartitionEpoch + 1
	bad := store.PartitionUpdate{New: next, Expected: p.PartitionEpoch + 5}
	if err := st.UpdatePartitions(ctx, []store.PartitionUpdate{bad}); !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
	if _, err := st.Partitions(ctx); err != nil {
		t.Fatal(err)
	}

	s := get(t, serveController(t, m))
	for series, want := range map[string]float64{
		`replicad_controller_store_write_duration_seconds_count{op="register_broker"}`:   1,
		`replicad_controller_store_write_duration_seconds_count{op="update_broker"}`:     1,
		`replicad_controller_store_write_duration_seconds_count{op="create_topic"}`:      1,
		`replicad_controller_store_write_duration_seconds_count{op="update_partitions"}`: 1,
		`replicad_controller_store_write_errors_total{op="update_partitions"}`:           1,
		`replicad_controller_store_write_errors_total{op="create_topic"}`:                0,
		// The 30 ms write is above the 25 ms bucket.
		`replicad_controller_store_write_duration_seconds_bucket{op="update_broker",le="0.025"}`: 0,
	} {
		if got := s.value(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if sum := s.value(t, `replicad_controller_store_write_duration_seconds_sum{op="update_broker"}`); sum < delay.Seconds() {
		t.Errorf("update_broker took %vs in all, want at least the store's %v", sum, delay)
	}
	if strings.Contains(s.text, `op="partitions"`) || strings.Contains(s.text, `op="partition"`) {
		t.Errorf("reads were timed:\n%s", s.text)
	}
}
