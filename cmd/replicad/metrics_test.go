package main

import (
	"io"
	"net/http"
	"testing"

	"github.com/rs/zerolog"
)

// TestMetricsEndpointAnswers ensures --metrics-listen serves /metrics with
// 200 and the placeholder comment until real metrics arrive.
func TestMetricsEndpointAnswers(t *testing.T) {
	m, err := startMetrics("127.0.0.1:0", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	resp, err := http.Get("http://" + m.addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != metricsPlaceholder {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
}
