package integration

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// metricsListeningPrefix starts replicad's stderr line naming its metrics address.
const metricsListeningPrefix = "replicad metrics listening on "

// metricsURL waits for b's metrics address line and returns its /metrics URL.
func metricsURL(t *testing.T, b *testutil.Broker) string {
	t.Helper()
	var addr string
	testutil.Eventually(t, 10*time.Second, func() error {
		for line := range strings.Lines(b.Stderr()) {
			if a, ok := strings.CutPrefix(line, metricsListeningPrefix); ok {
				addr = strings.TrimSpace(a)
				return nil
			}
		}
		return fmt.Errorf("no %q line on stderr", metricsListeningPrefix)
	})
	return "http://" + addr + "/metrics"
}

// scrapeMetrics GETs url and returns each sample's value by its series
// (`name` or `name{label="v",...}` as exported), and the raw text.
func scrapeMetrics(url string) (map[string]float64, string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
	}
	samples := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, "", fmt.Errorf("sample %q: %w", line, err)
		}
		samples[line[:i]] = v
	}
	return samples, string(body), nil
}

// waitMetric waits until every series in want has its value on url, and
// returns the last scrape.
func waitMetric(t *testing.T, url string, timeout time.Duration, want map[string]float64) map[string]float64 {
	t.Helper()
	var last map[string]float64
	testutil.Eventually(t, timeout, func() error {
		samples, _, err := scrapeMetrics(url)
		if err != nil {
			return err
		}
		last = samples
		for series, v := range want {
			got, ok := samples[series]
			if !ok {
				return fmt.Errorf("%s: no series %s", url, series)
			}
			if got != v {
				return fmt.Errorf("%s: %s = %v, want %v", url, series, got, v)
			}
		}
		return nil
	})
	return last
}

// TestMetricsUnderReplicationRisesWhenFollowerDies ensures a leader's
// /metrics reports replicad_under_replicated_partitions 0 while its followers
// are in sync, and 1 once a SIGKILLed follower has left the ISR, with
// replicad_isr_shrinks_total counting the shrink; followers report the
// partition under their follower metrics, and served calls are timed.
func TestMetricsUnderReplicationRisesWhenFollowerDies(t *testing.T) {
	const lag = time.Second
	c := newCluster(t, "metered", "--metrics-listen", "127.0.0.1:0", "--replica-lag-time-max", lag.String())
	urls := map[int32]string{}
	for _, id := range clusterIDs {
		urls[id] = metricsURL(t, c.brokers[id])
	}
	c.leaderAndIsr(clusterIDs, 1, 1, 1, 2, 3)
	for i := range 5 {
		resp, err := c.produce(1, -1, 10*time.Second, fmt.Sprintf("v%d", i))
		if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("acks=-1 produce %d: %v %v", i, resp, err)
		}
	}
	c.waitCaughtUp(1, 2, 10*time.Second)
	c.waitCaughtUp(1, 3, 10*time.Second)
	c.waitIsr(1, 10*time.Second, 1, 2, 3)

	before := waitMetric(t, urls[1], 10*time.Second, map[string]float64{
		"replicad_under_replicated_partitions":                        0,
		"replicad_offline_partitions":                                 0,
		"replicad_leaders":                                            1,
		"replicad_partitions":                                         1,
		`replicad_topic_leader_partitions{topic="metered"}`:           1,
		`replicad_topic_under_replicated_partitions{topic="metered"}`: 0,
		`replicad_topic_leader_log_end_offset{topic="metered"}`:       5,
	})
	if before[`replicad_request_duration_seconds_count{code="OK",method="/replicad.v1.LogService/Produce"}`] < 5 {
		t.Errorf("leader timed fewer than 5 Produce calls: %v", before[`replicad_request_duration_seconds_count{code="OK",method="/replicad.v1.LogService/Produce"}`])
	}
	if before[`replicad_request_duration_seconds_count{code="OK",method="/replicad.v1.ReplicaManagerService/LeaderAndIsr"}`] < 1 {
		t.Error("leader did not time its LeaderAndIsr call")
	}
	for _, id := range []int32{2, 3} {
		waitMetric(t, urls[id], 10*time.Second, map[string]float64{
			"replicad_leaders":                                    0,
			"replicad_under_replicated_partitions":                0,
			`replicad_topic_follower_partitions{topic="metered"}`: 1,
			"replicad_fetcher_max_lag":                            0,
		})
	}
	if _, text, err := scrapeMetrics(urls[2]); err != nil || strings.Contains(text, `replicad_topic_leader_partitions{topic="metered"}`) {
		t.Fatalf("follower 2 exports leader metrics of a topic it only follows (%v):\n%s", err, text)
	}
	shrinks := before["replicad_isr_shrinks_total"]

	c.kill(3)
	// Move the leader's LEO past follower 3's: a follower is out of sync only while behind.
	if resp, err := c.produce(1, 1, 10*time.Second, "behind-3"); err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("acks=1 produce: %v %v", resp, err)
	}
	after := waitMetric(t, urls[1], 10*lag+10*time.Second, map[string]float64{
		"replicad_under_replicated_partitions":                        1,
		`replicad_topic_under_replicated_partitions{topic="metered"}`: 1,
	})
	if got := after["replicad_isr_shrinks_total"]; got != shrinks+1 {
		t.Fatalf("replicad_isr_shrinks_total %v after follower 3 left the ISR, was %v: want one more", got, shrinks)
	}
	if isr := c.describe(1).GetIsr(); len(isr) != 2 {
		t.Fatalf("leader ISR %v with under-replication reported, want [1 2]", isr)
	}
}
