package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/replicad/replicad/internal/testutil"
)

const stopTimeout = 30 * time.Second

// TestSigtermCheckpointsHighWatermark ensures SIGTERM exits 0 after writing
// the partition's HW to replication-offset-checkpoint in Kafka's format.
func TestSigtermCheckpointsHighWatermark(t *testing.T) {
	dir := t.TempDir()
	// With an hour between checkpoints, only the shutdown can have written the file.
	b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{dir}, Args: []string{"--hw-checkpoint-interval", "1h"}})
	c := newClient(t, b.Dial(t))
	c.becomeLeader(1, leaderState("orders", 0, 1, 1))
	c.produce("orders", 0, -1, "a", "b", "c", "d")
	c.produce("orders", 0, 1, "e", "f", "g")

	if code := b.Terminate(stopTimeout); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0; stderr:\n%s", code, b.Stderr())
	}
	got, err := os.ReadFile(filepath.Join(dir, "replication-offset-checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n1\norders 0 7\n"; string(got) != want {
		t.Fatalf("replication-offset-checkpoint = %q, want %q", got, want)
	}
}

// TestRefusesAnotherBrokersDir ensures a broker will not start on a log dir
// that belongs to another broker id, and says why.
func TestRefusesAnotherBrokersDir(t *testing.T) {
	dir := t.TempDir()
	b, _ := startBroker(t, 1, dir)
	if code := b.Terminate(stopTimeout); code != 0 {
		t.Fatalf("broker 1 exit status %d; stderr:\n%s", code, b.Stderr())
	}
	code, stderr := testutil.RunBrokerExpectingExit(t, bins.Replicad, testutil.BrokerOptions{ID: 2, LogDirs: []string{dir}})
	// 1, a start-up failure (a crash, such as a panic, exits 2).
	if code != 1 {
		t.Fatalf("broker 2 exited %d on broker 1's dir, want 1:\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "another broker") || strings.Contains(stderr, "replicad listening on") || strings.Contains(stderr, "panic") {
		t.Fatalf("stderr does not explain the refusal (or it listened):\n%s", stderr)
	}
}

// TestServesHealthAndReflection ensures a running broker reports SERVING and
// lists every replicad service through reflection, as grpcurl needs.
func TestServesHealthAndReflection(t *testing.T) {
	b, _ := startBroker(t, 1, t.TempDir())
	conn := b.Dial(t)
	resp, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health = %v, %v", resp, err)
	}
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"replicad.v1.ReplicaManagerService", "replicad.v1.LogService", "replicad.v1.FetchService", "replicad.v1.ControllerService"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("reflection lists %v, missing %s", names, want)
		}
	}
}

// TestLosingTheLastLogDirExitsNonZero ensures the broker exits non-zero
// once its only log dir goes offline (here: its HW checkpoint cannot be
// written because a directory blocks the checkpoint's temporary file).
func TestLosingTheLastLogDirExitsNonZero(t *testing.T) {
	dir := t.TempDir()
	b, c := startBroker(t, 1, dir)
	c.becomeLeader(1, leaderState("orders", 0, 1, 1))
	// A directory where the checkpoint's .tmp file goes fails the write even for root.
	if err := os.Mkdir(filepath.Join(dir, "replication-offset-checkpoint.tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, _ = c.rm.CheckpointHighWatermarks(ctx(t), &replicadv1.CheckpointHighWatermarksRequest{})
	code, exited := b.Wait(stopTimeout)
	if !exited {
		t.Fatalf("broker still running with its only log dir offline; stderr:\n%s", b.Stderr())
	}
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, b.Stderr())
	}
}
