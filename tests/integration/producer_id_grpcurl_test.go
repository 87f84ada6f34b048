package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// grpcurlBin is REPLICAD_GRPCURL_BIN, else ../../bin/grpcurl; the test
// skips without one unless the variable is set.
func grpcurlBin(t *testing.T) string {
	t.Helper()
	g := os.Getenv("REPLICAD_GRPCURL_BIN")
	if g == "" {
		g, _ = filepath.Abs("../../bin/grpcurl")
	}
	if _, err := os.Stat(g); err != nil {
		if os.Getenv("REPLICAD_GRPCURL_BIN") != "" {
			t.Fatalf("REPLICAD_GRPCURL_BIN: %v", err)
		}
		t.Skipf("no grpcurl at %s (make tools builds it)", g)
	}
	return g
}

// The grpcurl example of InitProducerId and an idempotent produce
// (docs/getting-started.md, "Exactly once per partition: idempotent
// produce"), its commands
// as written there, against a controller and three brokers: a new ID, a
// produce carrying it, the same produce again answered as a duplicate at
// the same offset, its records read back with their producer fields from
// earliest (-2), and an epoch bump that fences: the second bump from the
// same epoch is INVALID_PRODUCER_EPOCH.
func TestGrpcurlInitProducerIdExample(t *testing.T) {
	grpcurl := grpcurlBin(t)
	c := newCtlCluster(t, 3*time.Second)
	c.createTopic("orders", 3, 3)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"grpcurl": grpcurl, "ctlclient": bins.Ctlclient} {
		if err := os.Symlink(src, filepath.Join(dir, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	addr := map[string]string{}
	for _, id := range clusterIDs {
		b, _ := c.broker(id)
		addr[fmt.Sprintf("127.0.0.1:909%d", id)] = b.Addr
	}
	var exports []string
	run := func(line string) string {
		t.Helper()
		for from, to := range addr {
			line = strings.ReplaceAll(line, from, to)
		}
		script := strings.Join(append(append([]string{}, exports...), line), "\n")
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CTLCLIENT_CONTROLLER="+c.ctlAddr)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		if strings.HasPrefix(line, "G=") || strings.HasPrefix(line, "P=") {
			exports = append(exports, line)
		}
		return string(out)
	}
	want := func(out string, res ...string) {
		t.Helper()
		for _, re := range res {
			if !regexp.MustCompile(re).MatchString(out) {
				t.Fatalf("output %q does not match %q", out, re)
			}
		}
	}

	run(`G="./bin/grpcurl -plaintext"`)
	// The PID= line asks for an ID: it runs once, and the ID it got is
	// kept for the lines after it.
	pid := strings.TrimSpace(run(`PID=$($G -d '{}' 127.0.0.1:9091 replicad.v1.LogService/InitProducerId | sed -n 's/.*"producerId": "\([0-9]*\)".*/\1/p'); echo "$PID"`))
	want(pid, `^[1-9][0-9]*$`)
	exports = append(exports, "PID="+pid)
	run(`./bin/ctlclient elect --topic orders --partition 1 --leader 1 || true`)
	testutil.Eventually(t, 30*time.Second, func() error {
		p, err := c.partitionState("orders", 1)
		if err == nil && p.GetLeader() != 1 {
			err = fmt.Errorf("orders-1 led by %d", p.GetLeader())
		}
		return err
	})
	run(`P="{\"topic\":\"orders\",\"partition\":1,\"acks\":-1,\"producer_id\":$PID,\"producer_epoch\":0,\"base_sequence\":0,\"records\":[{\"value\":\"$(printf hi | base64)\"}]}"`)
	var out string
	testutil.Eventually(t, 30*time.Second, func() error {
		out = run(`$G -d "$P" 127.0.0.1:9091 replicad.v1.LogService/Produce`)
		if strings.Contains(out, "errorCode") {
			return fmt.Errorf("produce: %s", out)
		}
		return nil
	})
	want(out, `"highWatermark": "1"`)
	if strings.Contains(out, "duplicate") {
		t.Fatalf("first produce answered as a duplicate: %s", out)
	}
	// The retry of a batch whose answer was lost: the original offset,
	// nothing appended.
	out = run(`$G -d "$P" 127.0.0.1:9091 replicad.v1.LogService/Produce`)
	want(out, `"duplicate": true`, `"highWatermark": "1"`)
	if strings.Contains(out, "baseOffset") {
		t.Fatalf("duplicate of the batch at offset 0 names another offset: %s", out)
	}
	out = run(`$G -d '{"topic":"orders","partition":1,"offset":-2}' 127.0.0.1:9091 replicad.v1.LogService/Consume`)
	want(out, `"producerId": "[1-9][0-9]*"`, `"value": "aGk="`)
	if strings.Contains(out, `"sequence"`) || strings.Contains(out, `"producerEpoch"`) {
		t.Fatalf("record at epoch 0, sequence 0: grpcurl leaves zero fields out, got %s", out)
	}
	want(run(`$G -d "{\"producer_id\":$PID,\"producer_epoch\":0}" 127.0.0.1:9092 replicad.v1.LogService/InitProducerId`), `"producerEpoch": 1`)
	want(run(`$G -d "{\"producer_id\":$PID,\"producer_epoch\":0}" 127.0.0.1:9093 replicad.v1.LogService/InitProducerId`),
		`"errorCode": "ERROR_CODE_INVALID_PRODUCER_EPOCH"`, `fenced`)
}
