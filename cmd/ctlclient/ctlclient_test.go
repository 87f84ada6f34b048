package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// TestLeaderAndIsrSendsTheFlags ensures every leader-and-isr flag reaches the
// broker and the table lists each partition's error code.
func TestLeaderAndIsrSendsTheFlags(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	r := ctl(t, addr, "", "leader-and-isr", "--controller-id", "0", "--controller-epoch", "2", "--topic", "orders", "--partition", "3",
		"--leader", "1", "--leader-epoch", "4", "--replicas", "1,2", "--partition-epoch", "5", "--new", "--broker-epoch", "6",
		"--live-broker", "2=127.0.0.1:9092")
	wantCode(t, r, 0)
	want := core.LeaderAndIsrRequest{ControllerID: 0, ControllerEpoch: 2, BrokerEpoch: 6,
		PartitionStates: []core.PartitionState{{TopicPartition: tp.TopicPartition{Topic: "orders", Partition: 3}, ControllerEpoch: 2, Leader: 1,
			LeaderEpoch: 4, ISR: []int32{1, 2}, PartitionEpoch: 5, Replicas: []int32{1, 2}, IsNew: true}},
		LiveLeaders: []core.Broker{{ID: 2, Host: "127.0.0.1", Port: 9092}}}
	if !reflect.DeepEqual(b.lastLAI, want) {
		t.Fatalf("broker got %+v\nwant %+v", b.lastLAI, want)
	}
	if !strings.Contains(r.stdout, "TOPIC") || !strings.Contains(r.stdout, "orders  3          NONE") {
		t.Fatalf("table:\n%s", r.stdout)
	}
}

// TestLeaderAndIsrErrorCodeExitsOne ensures a partition error code makes
// the exit status non-zero and shows in the table.
func TestLeaderAndIsrErrorCodeExitsOne(t *testing.T) {
	b := newMemBroker()
	b.laiResult = core.LeaderAndIsrResponse{PartitionErrors: []core.PartitionError{{TopicPartition: tp.TopicPartition{Topic: "orders"}, Error: core.ErrStaleControllerEpoch}}}
	addr := startBroker(t, b)
	r := ctl(t, addr, "", "leader-and-isr", "--controller-id", "0", "--controller-epoch", "1", "--topic", "orders", "--partition", "0",
		"--leader", "1", "--leader-epoch", "1", "--replicas", "1")
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "STALE_CONTROLLER_EPOCH") || !strings.Contains(r.stderr, "orders-0 STALE_CONTROLLER_EPOCH") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
}

// TestLeaderAndIsrFromFile ensures --file sends a protojson request for many
// partitions, in either field spelling.
func TestLeaderAndIsrFromFile(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	path := filepath.Join(t.TempDir(), "req.json")
	body := `{"controller_id": 0, "controllerEpoch": 3, "partitionStates": [
	  {"topic": "a", "partition": 0, "leader": 1, "leaderEpoch": 1, "isr": [1], "replicas": [1]},
	  {"topic": "a", "partition": 1, "leader": 1, "leader_epoch": 1, "isr": [1], "replicas": [1]}]}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	wantCode(t, ctl(t, addr, "", "leader-and-isr", "--file", path), 0)
	if got := len(b.lastLAI.PartitionStates); got != 2 || b.lastLAI.ControllerEpoch != 3 {
		t.Fatalf("broker got %+v", b.lastLAI)
	}
	wantCode(t, ctl(t, addr, body, "leader-and-isr", "--file", "-"), 0)
	wantCode(t, ctl(t, addr, "", "leader-and-isr", "--file", path, "--topic", "x"), 2)
	wantCode(t, ctl(t, addr, "{", "leader-and-isr", "--file", "-"), 2)
}

// TestRejectedRequestPrintsStatus ensures a gRPC error prints
// "ctlclient: <code>: <message>" and exits 1.
func TestRejectedRequestPrintsStatus(t *testing.T) {
	addr := startBroker(t, newMemBroker())
	r := ctl(t, addr, "", "leader-and-isr", "--controller-id", "0", "--controller-epoch", "1", "--topic", "orders", "--partition", "0",
		"--leader", "5", "--leader-epoch", "1", "--replicas", "1,2")
	wantCode(t, r, 1)
	if want := "ctlclient: InvalidArgument: partition_states[0].leader: broker 5 is not in replicas"; !strings.HasPrefix(r.stderr, want) {
		t.Fatalf("stderr %q, want prefix %q", r.stderr, want)
	}
}

// TestProduceThenConsume ensures values and stdin lines become records in
// order, stdin is batched, base offsets are printed, and consume reads
// everything up to the HW and stops.
func TestProduceThenConsume(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	r := ctl(t, addr, "", "produce", "--topic", "t", "--partition", "0", "--value", "a", "--value", "b")
	wantCode(t, r, 0)
	if r.stdout != "0\n" {
		t.Fatalf("base offsets %q", r.stdout)
	}
	var lines []string
	for i := range 1200 {
		lines = append(lines, fmt.Sprintf("line-%d", i))
	}
	// A linger longer than the test makes the batches depend on counts only.
	r = ctl(t, addr, strings.Join(lines, "\n")+"\n", "produce", "--topic", "t", "--partition", "0", "--acks", "1", "--linger-ms", "600000")
	wantCode(t, r, 0)
	if r.stdout != "2\n502\n1002\n" {
		t.Fatalf("base offsets %q, want 2, 502, 1002", r.stdout)
	}
	if !reflect.DeepEqual(b.produces, []int{2, 500, 500, 200}) {
		t.Fatalf("batches %v", b.produces)
	}

	r = ctl(t, addr, "", "consume", "--topic", "t", "--partition", "0")
	wantCode(t, r, 0)
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(got) != 1202 || got[0] != "0\ta" || got[1] != "1\tb" || got[1201] != "1201\tline-1199" {
		t.Fatalf("consumed %d lines, first %q last %q", len(got), got[0], got[len(got)-1])
	}

	r = ctl(t, addr, "", "consume", "--topic", "t", "--partition", "0", "--offset", "1", "--max-records", "4")
	wantCode(t, r, 0)
	if r.stdout != "1\tb\n2\tline-0\n3\tline-1\n4\tline-2\n" {
		t.Fatalf("consume --max-records: %q", r.stdout)
	}
	r = ctl(t, addr, "", "consume", "--topic", "t", "--partition", "0", "--offset", "5000")
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "OFFSET_OUT_OF_RANGE") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// TestProduceLingerSendsTypedLines ensures a stdin line is sent once
// --linger-ms passes, without waiting for the batch to fill or stdin to end.
func TestProduceLingerSendsTypedLines(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	pr, pw := io.Pipe()
	done := make(chan result, 1)
	go func() {
		done <- ctlReader(t, addr, pr, "produce", "--topic", "t", "--partition", "0", "--linger-ms", "1")
	}()
	if _, err := pw.Write([]byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.produceCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the typed line was not sent while stdin stayed open")
		}
		time.Sleep(time.Millisecond)
	}
	pw.Close()
	r := <-done
	wantCode(t, r, 0)
	if r.stdout != "0\n" {
		t.Fatalf("stdout %q", r.stdout)
	}
}

// TestProduceErrorCodeExitsOne ensures a produce answered with an error code exits 1 naming it.
func TestProduceErrorCodeExitsOne(t *testing.T) {
	addr := startBroker(t, newMemBroker())
	r := ctl(t, addr, "", "produce", "--topic", "notleader", "--partition", "0", "--value", "x")
	wantCode(t, r, 1)
	if !strings.Contains(r.stderr, "produce notleader-0: NOT_LEADER_OR_FOLLOWER") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// TestDescribeJSONParses ensures -o json prints a response that parses back
// as protojson, with global flags given after the command.
func TestDescribeJSONParses(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	wantCode(t, ctl(t, addr, "", "produce", "--topic", "t", "--partition", "2", "--value", "a"), 0)
	r := ctl(t, "127.0.0.1:1", "", "describe", "--topic", "t", "--broker", addr, "-o", "json")
	wantCode(t, r, 0)
	var resp replicadv1.DescribePartitionsResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &resp); err != nil {
		t.Fatalf("%v in\n%s", err, r.stdout)
	}
	if len(resp.Partitions) != 1 || resp.Partitions[0].GetHighWatermark() != 1 || resp.Partitions[0].GetPartition() != 2 {
		t.Fatalf("parsed %v", &resp)
	}
	if !strings.Contains(r.stdout, `
      "highWatermark": "1",
`) {
		t.Fatalf("not grpcurl-style json:\n%s", r.stdout)
	}

	r = ctl(t, addr, "", "describe")
	wantCode(t, r, 0)
	for _, col := range []string{"TOPIC", "PARTITION", "ROLE", "LEADER", "EPOCH", "P-EPOCH", "REPLICAS", "ISR", "HW", "LEO", "LOG-START", "DIR", "leader", "/data/a"} {
		if !strings.Contains(r.stdout, col) {
			t.Errorf("describe table lacks %q:\n%s", col, r.stdout)
		}
	}
	wantCode(t, ctl(t, addr, "", "describe", "--partition", "1"), 2)
}

// TestOtherAdminCommands ensures update-metadata, checkpoint and
// stop-replica report their answers and exit by their error codes.
func TestOtherAdminCommands(t *testing.T) {
	addr := startBroker(t, newMemBroker())
	wantCode(t, ctl(t, addr, "", "update-metadata", "--controller-id", "0", "--controller-epoch", "1", "--live-broker", "1=127.0.0.1:9091"), 0)
	r := ctl(t, addr, "", "checkpoint")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "/data/a") {
		t.Fatalf("checkpoint table:\n%s", r.stdout)
	}
	r = ctl(t, addr, "", "checkpoint", "-o", "json")
	wantCode(t, r, 0)
	// Every field, zero values included, so jq filters find them.
	if want := "{\n  \"errorCode\": \"ERROR_CODE_NONE\",\n  \"logDirs\": [\n    {\n      \"logDir\": \"/data/a\",\n      \"partitions\": 2,\n      \"errorCode\": \"ERROR_CODE_NONE\"\n    }\n  ]\n}\n"; r.stdout != want {
		t.Fatalf("checkpoint json %q, want %q", r.stdout, want)
	}
	r = ctl(t, addr, "", "stop-replica", "--controller-id", "0", "--controller-epoch", "1", "--topic", "t", "--partition", "0")
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "FENCED_LEADER_EPOCH") {
		t.Fatalf("stop-replica table:\n%s", r.stdout)
	}
	wantCode(t, ctl(t, addr, "", "update-metadata", "--controller-id", "0", "--controller-epoch", "1", "--live-broker", "nonsense"), 2)
}

// TestAlterLogDir ensures alter-log-dir sends the move, exits 0 on NONE and
// 1 on an error code, refuses a relative dir as a usage error, and with
// --wait reports the move done once describe shows the new dir.
func TestAlterLogDir(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	wantCode(t, ctl(t, addr, "", "produce", "--topic", "orders", "--partition", "0", "--value", "a"), 0)
	r := ctl(t, addr, "", "alter-log-dir", "--topic", "orders", "--partition", "0", "--dir", "/data/b", "--wait")
	wantCode(t, r, 0)
	if !strings.Contains(r.stdout, "NONE") || !strings.Contains(r.stdout, "moved orders-0 to /data/b") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	if d := b.Describe("orders", nil).Partitions[0].LogDir; d != "/data/b" {
		t.Fatalf("log dir %s", d)
	}
	r = ctl(t, addr, "", "alter-log-dir", "--topic", "orders", "--partition", "0", "--dir", "/data/zz")
	wantCode(t, r, 1)
	if !strings.Contains(r.stdout, "LOG_DIR_NOT_FOUND") {
		t.Fatalf("stdout:\n%s", r.stdout)
	}
	wantCode(t, ctl(t, addr, "", "alter-log-dir", "--topic", "nope", "--partition", "0", "--dir", "/data/b"), 1)
	wantCode(t, ctl(t, addr, "", "alter-log-dir", "--topic", "orders", "--partition", "0", "--dir", "data/b"), 2)
	wantCode(t, ctl(t, addr, "", "alter-log-dir", "--topic", "orders", "--partition", "0"), 2)
}

// TestPerfProduceReports ensures perf produce sends every record across the
// partitions and reports a summary.
func TestPerfProduceReports(t *testing.T) {
	b := newMemBroker()
	addr := startBroker(t, b)
	// Both ways: on ProduceStreams (the default) and unary.
	for i, stream := range []string{"--stream=true", "--stream=false"} {
		r := ctl(t, addr, "", "perf", "produce", "--topic", "perf", "--partitions", "3", "--records", "1050", "--batch", "100",
			"--record-size", "10", "--concurrency", "2", "-o", "json", stream)
		wantCode(t, r, 0)
		var s perfSummary
		if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
			t.Fatalf("%s: %v in %q", stream, err, r.stdout)
		}
		if s.Records != 1050 || s.Failed != 0 || s.MaxMs < s.P50Ms {
			t.Fatalf("%s: summary %+v", stream, s)
		}
		total := 0
		for p := range int32(3) {
			total += len(b.logs[tp.TopicPartition{Topic: "perf", Partition: p}])
		}
		if total != 1050*(i+1) {
			t.Fatalf("%s: broker holds %d records", stream, total)
		}
		r = ctl(t, addr, "", "perf", "produce", "--topic", "notleader", "--records", "10", stream)
		wantCode(t, r, 1)
		if !strings.Contains(r.stdout, "records sent") || !strings.Contains(r.stderr, "NOT_LEADER_OR_FOLLOWER") {
			t.Fatalf("%s: stdout %q stderr %q", stream, r.stdout, r.stderr)
		}
		// Bad input fails the test as a unary call's InvalidArgument does.
		r = ctl(t, addr, "", "perf", "produce", "--topic", "perf", "--records", "1", "--timeout-ms", "-1", stream)
		wantCode(t, r, 1)
		if !strings.Contains(r.stderr, "InvalidArgument") || !strings.Contains(r.stderr, "timeout_ms") {
			t.Fatalf("%s: bad timeout: stderr %q", stream, r.stderr)
		}
	}
}

// TestUsageAndHelp ensures help exits 0 with an example for every command,
// usage errors exit 2, and commands of later work exit 1 saying when they arrive.
func TestUsageAndHelp(t *testing.T) {
	wantCode(t, ctl(t, "", "", "--help"), 0)
	for _, c := range commands() {
		r := ctl(t, "", "", append(strings.Fields(c.name), "--help")...)
		wantCode(t, r, 0)
		if !strings.Contains(r.stdout, "Example:") {
			t.Errorf("%s --help has no example:\n%s", c.name, r.stdout)
		}
		if c.later != "" {
			r = ctl(t, "", "", append(strings.Fields(c.name), "--topic", "x")...)
			wantCode(t, r, 1)
			if !strings.Contains(r.stderr, "not implemented yet: arrives with "+c.later) {
				t.Errorf("%s: %q", c.name, r.stderr)
			}
		}
	}
	wantCode(t, ctl(t, "", "", "help", "consume"), 0)
	wantCode(t, ctl(t, "", ""), 2)
	wantCode(t, ctl(t, "", "", "nope"), 2)
	wantCode(t, ctl(t, "", "", "describe", "-o", "yaml"), 2)
	wantCode(t, ctl(t, "", "", "produce", "--topic", "t"), 2)
	wantCode(t, ctl(t, "", "", "produce", "--topic", "t", "--partition", "0", "--acks", "2"), 2)
	r := ctl(t, "", "", "describe-cluster")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, "--controller is required") {
		t.Fatalf("stderr %q", r.stderr)
	}
}

// A mistyped command names the nearest one; a word far from every command
// does not pretend to know.
func TestUnknownCommandSuggestsTheNearest(t *testing.T) {
	r := ctl(t, "", "", "describe-clustr")
	wantCode(t, r, 2)
	if !strings.Contains(r.stderr, `did you mean "describe-cluster"?`) {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = ctl(t, "", "", "prodcue")
	if !strings.Contains(r.stderr, `did you mean "produce"?`) {
		t.Fatalf("stderr %q", r.stderr)
	}
	r = ctl(t, "", "", "frobnicate")
	wantCode(t, r, 2)
	if strings.Contains(r.stderr, "did you mean") {
		t.Fatalf("a suggestion for a word near nothing: %q", r.stderr)
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Fatalf("editDistance = %d, want 3", d)
	}
}

// Every flag's help line names its value's type, not a backquoted phrase of
// its usage (the flag package takes the first `...` as the value's name).
func TestHelpLinesAreNotGarbled(t *testing.T) {
	for _, c := range commands() {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		if c.flags != nil {
			c.flags(fs)
		}
		fs.VisitAll(func(f *flag.Flag) {
			if name, _ := flag.UnquoteUsage(f); strings.Contains(name, " ") {
				t.Errorf("%s --%s: help line reads %q as the value's name", c.name, f.Name, name)
			}
		})
	}
}

// An explicit --broker wins over CTLCLIENT_CONTROLLER (and
// CTLCLIENT_BOOTSTRAP): produce goes to that broker, not through a
// controller the environment names (here one that does not answer).
func TestExplicitBrokerWinsOverTheEnvironment(t *testing.T) {
	addr := startBroker(t, newMemBroker())
	dead := deadAddr(t)
	for _, env := range []string{"CTLCLIENT_CONTROLLER", "CTLCLIENT_BOOTSTRAP"} {
		var out, errOut bytes.Buffer
		getenv := func(k string) string {
			if k == env {
				return dead
			}
			return ""
		}
		code := run(context.Background(), []string{"--broker", addr, "--timeout", "2s", "produce", "--topic", "orders", "--partition", "0",
			"--acks", "1", "--value", "v"}, strings.NewReader(""), &out, &errOut, getenv)
		if code != 0 {
			t.Fatalf("with %s=%s and an explicit --broker: exit %d, %s", env, dead, code, errOut.String())
		}
	}
}

// A broker's address given as --controller, or a controller's as --broker,
// says which it is not, with the address, instead of gRPC's
// "Unimplemented: unknown service".
func TestWrongKindOfAddressSaysSo(t *testing.T) {
	broker := startBroker(t, newMemBroker())
	r := ctl(t, "", "", "--controller", broker, "--timeout", "1s", "describe-cluster")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, broker, "not a controller", "--broker")
	controller := startController(t, describing(&replicadv1.DescribeClusterResponse{}))
	r = ctl(t, "", "", "--broker", controller, "describe")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, controller+" is not a broker", "--controller")
	if strings.Contains(r.stderr, "Unimplemented") {
		t.Errorf("stderr %q", r.stderr)
	}
}

// A broker that accepts connections but never answers fails within
// --timeout naming the address, not a bare "context deadline exceeded".
func TestHungBrokerNamesTheAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	r := ctl(t, lis.Addr().String(), "", "--timeout", "300ms", "describe")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "broker "+lis.Addr().String(), "DeadlineExceeded")
}
