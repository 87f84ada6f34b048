package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// TestServerBinaryRunsTheController runs the controller as `replicad
// controller` (the server binary, as Kafka 4 does) with three real brokers:
// it creates a topic, takes acks=all records, elects a new leader when the
// old one is killed, survives its own restart with the state kept, and
// stops cleanly on SIGTERM.
func TestServerBinaryRunsTheController(t *testing.T) {
	c := newCtlClusterFrom(t, true, 2*time.Second, nil, nil)
	if !strings.Contains(c.ctl.Stderr(), "controller serving") {
		t.Fatalf("controller stderr lacks its start line:\n%s", c.ctl.Stderr())
	}
	c.createTopic("events", 1, 3)
	if err := c.produceToLeader("events", 0, "before"); err != nil {
		t.Fatalf("produce before the failover: %v", err)
	}
	p, err := c.partitionState("events", 0)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := c.broker(p.GetLeader())
	old.Signal(syscall.SIGKILL)
	c.waitFenced(p.GetLeader())
	np := c.waitNewLeader("events", 0, p.GetLeader(), 30*time.Second)
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceTo(np.GetLeader(), "events", 0, "after") })

	// Restarted on the same store, it keeps the partition's state.
	if code := c.ctl.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("replicad controller exited %d on SIGTERM; stderr:\n%s", code, c.ctl.Stderr())
	}
	if !strings.Contains(c.ctl.Stderr(), "controller stopped") {
		t.Fatalf("no clean stop in stderr:\n%s", c.ctl.Stderr())
	}
	c.startController()
	testutil.Eventually(t, 30*time.Second, func() error {
		q, err := c.partitionState("events", 0)
		if err != nil {
			return err
		}
		if q.GetLeader() != np.GetLeader() || q.GetLeaderEpoch() < np.GetLeaderEpoch() {
			return fmt.Errorf("after restart leader %d epoch %d, want %d epoch >= %d", q.GetLeader(), q.GetLeaderEpoch(), np.GetLeader(), np.GetLeaderEpoch())
		}
		return nil
	})
	if code := c.ctl.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("replicad controller exited %d on SIGTERM; stderr:\n%s", code, c.ctl.Stderr())
	}
}

// TestConfigFilesRunACluster starts `replicad controller --config` and a
// broker with --config, as a packaged deployment does: the files' values
// apply (JSON logs, the controller address, its store), and a flag on the
// command line wins over the file (--id 1 over the file's id: 9).
func TestConfigFilesRunACluster(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctlAddr := freeAddr(t)
	ctlConf := write("controller.yaml", fmt.Sprintf("listen: %s\nstore: %s\nsession-timeout: 2s\nlog-format: json\n", ctlAddr, filepath.Join(dir, "controller")))
	ctl := testutil.StartServerController(t, bins.Replicad, nil, "--config", ctlConf)
	brokerConf := write("broker.yaml", fmt.Sprintf("id: 9\ncontroller: %s\nlog-format: json\nmin-insync-replicas: 1\n", ctlAddr))
	b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{t.TempDir()}, Args: []string{"--config", brokerConf}})

	conn := ctl.Dial(t)
	api := replicadv1.NewControllerServiceClient(conn)
	testutil.Eventually(t, 30*time.Second, func() error {
		resp, err := api.DescribeCluster(ctx(t), &replicadv1.DescribeClusterRequest{})
		if err != nil {
			return err
		}
		for _, br := range resp.GetBrokers() {
			if br.GetId() == 9 {
				t.Fatalf("the file's id 9 won over --id 1: %v", resp.GetBrokers())
			}
			if br.GetId() == 1 && br.GetAlive() {
				return nil
			}
		}
		return fmt.Errorf("broker 1 not registered: %v", resp.GetBrokers())
	})
	for name, p := range map[string]*testutil.Broker{"controller": ctl, "broker": b} {
		if !jsonLogLine(p.Stderr()) {
			t.Errorf("%s: no JSON log line despite log-format: json in its file:\n%s", name, p.Stderr())
		}
	}
}

// jsonLogLine reports whether stderr holds a zerolog JSON line.
func jsonLogLine(stderr string) bool {
	for _, line := range strings.Split(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["level"] != nil && m["message"] != nil {
			return true
		}
	}
	return false
}
