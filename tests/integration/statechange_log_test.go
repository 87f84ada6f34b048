package integration

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// TestStateChangeLogIsJSON runs replicad with --log-format json, the broker
// at warn and --state-change-log-level trace: every log line is one JSON
// object with level, time and message, nothing of the broker's own below
// warn, and a LeaderAndIsr is logged by the state.change logger with its
// stable fields (Kafka's per-partition lines, at trace).
func TestStateChangeLogIsJSON(t *testing.T) {
	b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{t.TempDir()},
		Args: []string{"--log-format", "json", "--log-level", "warn", "--state-change-log-level", "trace"}})
	c := newClient(t, b.Dial(t))
	c.becomeLeader(3, leaderState("orders", 0, 1, 4))

	var found map[string]any
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, line := range strings.Split(b.Stderr(), "\n") {
			if line == "" || strings.HasPrefix(line, "replicad listening on ") {
				continue // the address line scripts read, not a log line
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("a log line is not JSON (%v): %q", err, line)
			}
			for _, k := range []string{"level", "time", "message"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("log line without %q: %q", k, line)
				}
			}
			if m["logger"] != "state.change" && m["level"] != "warn" && m["level"] != "error" {
				t.Fatalf("a broker line below --log-level warn: %q", line)
			}
			if m["logger"] == "state.change" && m["topic"] == "orders" && m["level"] == "trace" &&
				strings.Contains(fmt.Sprint(m["message"]), "become-leader transition") {
				found = m
			}
		}
		if found == nil {
			return fmt.Errorf("no state.change line for orders-0 becoming leader yet")
		}
		return nil
	})
	for k, want := range map[string]any{"partition": 0.0, "leader": 1.0, "leader_epoch": 4.0, "controller_epoch": 3.0, "controller_id": 0.0} {
		if found[k] != want {
			t.Errorf("state.change line %v: %s = %v, want %v", found, k, found[k], want)
		}
	}
}
