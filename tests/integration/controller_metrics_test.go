package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// ctlMetricsListeningPrefix starts the controller's stderr line naming its
// metrics address (server.ControllerMetricsListeningPrefix).
const ctlMetricsListeningPrefix = "replicad controller metrics listening on "

// listenedURL waits for the stderr line of p starting with prefix and
// returns http://ADDR/metrics.
func listenedURL(t *testing.T, p *testutil.Broker, prefix string) string {
	t.Helper()
	var addr string
	testutil.Eventually(t, 10*time.Second, func() error {
		for line := range strings.Lines(p.Stderr()) {
			if a, ok := strings.CutPrefix(line, prefix); ok {
				addr = strings.TrimSpace(a)
				return nil
			}
		}
		return fmt.Errorf("no %q line on stderr", prefix)
	})
	return "http://" + addr + "/metrics"
}

// withControllerMetrics restarts c's controller with --metrics-listen on a
// free port (the cluster helpers start it without) and returns its URL.
func withControllerMetrics(t *testing.T, c *ctlCluster) string {
	t.Helper()
	if code := c.ctl.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("controller exited %d on SIGTERM:\n%s", code, c.ctl.Stderr())
	}
	c.ctlArgs = append(c.ctlArgs, "--metrics-listen", "127.0.0.1:0")
	c.startController()
	url := listenedURL(t, c.ctl, ctlMetricsListeningPrefix)
	c.waitAlive(clusterIDs...)
	return url
}

// TestControllerMetricsFollowABrokerDeath scrapes a real `replicad
// controller --metrics-listen` over HTTP: it is active at epoch 2 (it was
// restarted once), sees 3 brokers and the topic's partitions all in sync;
// when a broker is SIGKILLed it reports the broker fenced, the partitions
// under-replicated, the leadership it lost as a leader change and as
// imbalance on it; once the broker is back, all of that clears.
func TestControllerMetricsFollowABrokerDeath(t *testing.T) {
	c := newCtlClusterFrom(t, true, 2*time.Second, nil, nil)
	url := withControllerMetrics(t, c)
	c.createTopic("watched", 3, 3)
	for p := int32(0); p < 3; p++ {
		for _, id := range clusterIDs {
			c.waitInIsr("watched", p, id, 30*time.Second)
		}
	}
	before := waitMetric(t, url, 30*time.Second, map[string]float64{
		"replicad_controller_active":                                1,
		"replicad_controller_epoch":                                 2,
		"replicad_controller_registered_brokers":                    3,
		"replicad_controller_fenced_brokers":                        0,
		"replicad_controller_partitions":                            3,
		"replicad_controller_offline_partitions":                    0,
		"replicad_controller_leaderless_partitions":                 0,
		"replicad_controller_under_replicated_partitions":           0,
		"replicad_controller_under_min_isr_partitions":              0,
		"replicad_controller_preferred_leader_imbalance_partitions": 0,
		`replicad_controller_broker_fenced{broker="3"}`:             0,
		`replicad_controller_broker_leader_partitions{broker="3"}`:  1,
	})
	if n := before[`replicad_controller_store_write_duration_seconds_count{op="create_topic"}`]; n != 1 {
		t.Errorf("%v create_topic store writes timed, want 1", n)
	}
	if n := before["replicad_controller_partition_state_changes_total"]; n < 3 {
		t.Errorf("%v partition state changes after creating 3 partitions", n)
	}
	leaderChanges := before["replicad_controller_leader_changes_total"]

	b3, _ := c.broker(3)
	b3.Signal(syscall.SIGKILL)
	c.waitFenced(3)
	after := waitMetric(t, url, 30*time.Second, map[string]float64{
		"replicad_controller_fenced_brokers":                                  1,
		`replicad_controller_broker_fenced{broker="3"}`:                       1,
		`replicad_controller_broker_leader_partitions{broker="3"}`:            0,
		`replicad_controller_broker_preferred_not_led_partitions{broker="3"}`: 1,
		"replicad_controller_under_replicated_partitions":                     3,
		"replicad_controller_preferred_leader_imbalance_partitions":           1,
		"replicad_controller_offline_partitions":                              0,
	})
	if got := after["replicad_controller_leader_changes_total"]; got != leaderChanges+1 {
		t.Errorf("leader changes %v after broker 3's death, was %v: want one more (the partition it led)", got, leaderChanges)
	}
	if after[`replicad_controller_store_write_duration_seconds_count{op="update_broker"}`] < 1 {
		t.Error("the fencing write was not timed")
	}

	c.startBroker(3)
	waitMetric(t, url, 60*time.Second, map[string]float64{
		"replicad_controller_fenced_brokers":              0,
		`replicad_controller_broker_fenced{broker="3"}`:   0,
		"replicad_controller_under_replicated_partitions": 0,
	})
}

// TestEtcdControllersMetricsNameTheActiveOne runs two controllers on one
// etcd with --metrics-listen: exactly one scrapes replicad_controller_active
// 1 with the cluster's figures, the standby 0 with none of them; when the
// active one is killed -9, the standby's scrape turns active at a higher
// epoch and reports the broker.
func TestEtcdControllersMetricsNameTheActiveOne(t *testing.T) {
	endpoint := strings.TrimPrefix(testutil.StartEtcd(t)[0], "http://")
	var addrs []string
	var procs []*testutil.Broker
	var urls []string
	for range 2 {
		addr := freeAddr(t)
		p := testutil.StartServerController(t, bins.Replicad, nil, "--listen", addr, "--store", "etcd://"+endpoint,
			"--election-ttl", "2s", "--session-timeout", "3s", "--metrics-listen", "127.0.0.1:0")
		addrs, procs, urls = append(addrs, addr), append(procs, p), append(urls, listenedURL(t, p, ctlMetricsListeningPrefix))
	}
	testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{t.TempDir()},
		Args: []string{"--controller", strings.Join(addrs, ",")}})

	// activeOne waits until exactly one controller scrapes active, with the
	// broker registered, and the other as a standby; it returns the active
	// one's index and epoch.
	activeOne := func() (int, float64) {
		t.Helper()
		active, epoch := -1, 0.0
		testutil.Eventually(t, 30*time.Second, func() error {
			active = -1
			for i, u := range urls {
				if !procs[i].Running() {
					continue
				}
				s, _, err := scrapeMetrics(u)
				if err != nil {
					return err
				}
				switch s["replicad_controller_active"] {
				case 1:
					if active >= 0 {
						return fmt.Errorf("controllers %d and %d both scrape active", active, i)
					}
					if s["replicad_controller_registered_brokers"] != 1 {
						return fmt.Errorf("active controller %d: %v registered brokers", i, s["replicad_controller_registered_brokers"])
					}
					active, epoch = i, s["replicad_controller_epoch"]
				case 0:
					if _, ok := s["replicad_controller_registered_brokers"]; ok {
						return fmt.Errorf("standby %d exports the cluster's figures", i)
					}
				default:
					return fmt.Errorf("controller %d: no replicad_controller_active", i)
				}
			}
			if active < 0 {
				return fmt.Errorf("no controller scrapes active")
			}
			return nil
		})
		return active, epoch
	}
	first, epoch := activeOne()
	procs[first].Signal(syscall.SIGKILL)
	second, epoch2 := activeOne()
	if second == first || epoch2 <= epoch {
		t.Fatalf("after killing controller %d (epoch %v): controller %d active at epoch %v", first, epoch, second, epoch2)
	}
}
