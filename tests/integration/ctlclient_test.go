package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

type ctlResult struct {
	code           int
	stdout, stderr string
}

// ctlclient runs the built ctlclient against broker.
func ctlclient(t *testing.T, broker, stdin string, args ...string) ctlResult {
	t.Helper()
	return runCtlclient(t, nil, stdin, append([]string{"--broker", broker}, args...)...)
}

// runCtlclientEnv runs the built ctlclient with env added to the test's.
func runCtlclientEnv(t *testing.T, env []string, args ...string) ctlResult {
	t.Helper()
	return runCtlclient(t, env, "", args...)
}

// runCtlclient runs the built ctlclient with args, env added to the test's
// and stdin, bounded by rpcTimeout, and returns its exit code and output.
func runCtlclient(t *testing.T, env []string, stdin string, args ...string) ctlResult {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	cmd := exec.CommandContext(c, bins.Ctlclient, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("ctlclient %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return ctlResult{code, out.String(), errOut.String()}
}

func (r ctlResult) want(t *testing.T, code int) ctlResult {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// TestCtlclientEndToEnd ensures an operator can make a broker lead a
// partition, produce and consume through ctlclient, read describe as json,
// and that exit statuses report stale epochs and rejected requests.
func TestCtlclientEndToEnd(t *testing.T) {
	b, _ := startBroker(t, 1, t.TempDir())
	addr := b.Addr
	lai := []string{"leader-and-isr", "--controller-id", "0", "--controller-epoch", "1", "--topic", "orders", "--partition", "0",
		"--leader", "1", "--leader-epoch", "1", "--replicas", "1", "--new"}

	r := ctlclient(t, addr, "", lai...).want(t, 0)
	if !strings.Contains(r.stdout, "orders") || !strings.Contains(r.stdout, "NONE") {
		t.Fatalf("leader-and-isr table:\n%s", r.stdout)
	}

	r = ctlclient(t, addr, "", "produce", "--topic", "orders", "--partition", "0", "--value", "hello", "--value", "world").want(t, 0)
	if r.stdout != "0\n" {
		t.Fatalf("produce printed %q, want base offset 0", r.stdout)
	}
	r = ctlclient(t, addr, "one\ntwo\nthree\n", "produce", "--topic", "orders", "--partition", "0", "--acks", "1").want(t, 0)
	if r.stdout != "2\n" {
		t.Fatalf("stdin produce printed %q, want base offset 2", r.stdout)
	}

	r = ctlclient(t, addr, "", "consume", "--topic", "orders", "--partition", "0").want(t, 0)
	if want := "0\thello\n1\tworld\n2\tone\n3\ttwo\n4\tthree\n"; r.stdout != want {
		t.Fatalf("consume printed %q, want %q", r.stdout, want)
	}
	r = ctlclient(t, addr, "", "consume", "--topic", "orders", "--partition", "0", "--offset", "3", "--max-records", "1").want(t, 0)
	if r.stdout != "3\ttwo\n" {
		t.Fatalf("consume --offset 3 --max-records 1 printed %q", r.stdout)
	}

	r = ctlclient(t, addr, "", "describe", "-o", "json").want(t, 0)
	var desc replicadv1.DescribePartitionsResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &desc); err != nil {
		t.Fatalf("describe -o json does not parse: %v\n%s", err, r.stdout)
	}
	if len(desc.GetPartitions()) != 1 {
		t.Fatalf("describe: %v", &desc)
	}
	p := desc.GetPartitions()[0]
	if p.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER || p.GetHighWatermark() != 5 || p.GetLeaderEpoch() != 1 || desc.GetBrokerId() != 1 {
		t.Fatalf("describe: %v", &desc)
	}
	r = ctlclient(t, addr, "", "describe").want(t, 0)
	if !strings.Contains(r.stdout, "TOPIC") || !strings.Contains(r.stdout, "leader") {
		t.Fatalf("describe table:\n%s", r.stdout)
	}

	// The same leader epoch again is stale (the seed's choice): an error code, so exit 1.
	r = ctlclient(t, addr, "", lai...).want(t, 1)
	if !strings.Contains(r.stdout, "STALE_CONTROLLER_EPOCH") {
		t.Fatalf("stale leader-and-isr table:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}

	r = ctlclient(t, addr, "", "leader-and-isr", "--controller-id", "0", "--controller-epoch", "1", "--topic", "orders", "--partition", "1",
		"--leader", "1", "--leader-epoch", "1", "--replicas", "2").want(t, 1)
	if !strings.HasPrefix(r.stderr, "ctlclient: InvalidArgument: partition_states[0].leader") {
		t.Fatalf("rejected request stderr %q", r.stderr)
	}

	ctlclient(t, addr, "", "checkpoint").want(t, 0)
	ctlclient(t, addr, "", "produce", "--topic", "nowhere", "--partition", "0", "--value", "x").want(t, 1)
	ctlclient(t, addr, "", "produce", "--topic", "orders").want(t, 2)
	// Controller commands need --controller.
	r = ctlclient(t, addr, "", "create-topic", "--topic", "x", "--partitions", "1", "--replication-factor", "1").want(t, 2)
	if !strings.Contains(r.stderr, "--controller") {
		t.Fatalf("create-topic without a controller: stderr %q, want it to name --controller", r.stderr)
	}
}
