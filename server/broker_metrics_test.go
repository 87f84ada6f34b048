package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/server/metrics"
)

// TestMetricsEndpointAnswers ensures --metrics-listen serves /metrics as
// Prometheus text with the broker's metrics, and /debug/pprof only with
// --pprof.
func TestMetricsEndpointAnswers(t *testing.T) {
	m, err := newMetrics(BrokerConfig{MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Observe(metrics.Sources{Replicas: func() core.MetricsSnapshot {
		return core.MetricsSnapshot{Partitions: 3, UnderReplicated: 1}
	}}); err != nil {
		t.Fatal(err)
	}
	srv, err := startMetrics("127.0.0.1:0", m, zerolog.Nop(), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	body := httpGet(t, "http://"+srv.addr()+"/metrics")
	for _, want := range []string{"\nreplicad_partitions 3\n", "\nreplicad_under_replicated_partitions 1\n", "\nreplicad_isr_shrinks_total 0\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", strings.TrimSpace(want), body)
		}
	}
	if body := httpGet(t, "http://"+srv.addr()+"/debug/pprof/"); !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ index: %q", body)
	}
}

// TestMetricsOffWithoutListen ensures an empty --metrics-listen builds no
// metrics, serves nothing, and gives core a nil recorder.
func TestMetricsOffWithoutListen(t *testing.T) {
	m, err := newMetrics(BrokerConfig{})
	if err != nil || m != nil {
		t.Fatalf("newMetrics without --metrics-listen: %v %v, want nil", m, err)
	}
	if rec := metricsRecorder(m); rec != nil {
		t.Fatalf("recorder %#v, want a nil interface", rec)
	}
	if opts := metricsServerOptions(m); opts != nil {
		t.Fatalf("%d server options without metrics", len(opts))
	}
	srv, err := startMetrics("", m, zerolog.Nop(), nil, false)
	if err != nil || srv.addr() != "" {
		t.Fatalf("startMetrics(\"\"): %q %v", srv.addr(), err)
	}
	srv.close()
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", url, resp.StatusCode, body)
	}
	return string(body)
}

// TestPprofOffByDefault ensures the metrics listener serves no profiles
// without --pprof.
func TestPprofOffByDefault(t *testing.T) {
	m, err := newMetrics(BrokerConfig{MetricsListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Observe(metrics.Sources{Replicas: func() core.MetricsSnapshot { return core.MetricsSnapshot{} }}); err != nil {
		t.Fatal(err)
	}
	srv, err := startMetrics("127.0.0.1:0", m, zerolog.Nop(), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.close()
	resp, err := http.Get("http://" + srv.addr() + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without --pprof: %s, want 404", resp.Status)
	}
}
