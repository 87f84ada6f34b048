package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/vfs/crashfs"
	"github.com/replicad/replicad/internal/syncbuf"
	"github.com/replicad/replicad/internal/testutil"
)

// brokerConfig is a standalone broker on dir, listening on a free port,
// without telemetry export.
func testBrokerConfig(t *testing.T, dir string, stderr *syncbuf.Buffer) BrokerConfig {
	t.Helper()
	return BrokerConfig{
		BrokerID:             1,
		Listen:               "127.0.0.1:0",
		LogDirs:              []string{dir},
		HWCheckpointInterval: time.Second,
		ReplicaLagTimeMax:    10 * time.Second,
		NumReplicaFetchers:   1,
		MinInsyncReplicas:    1,
		MaxPartitions:        1000,
		Logger:               zerolog.Nop(),
		Stderr:               stderr,
		TracerProvider:       noop.NewTracerProvider(),
	}
}

// TestBrokerServesAndStops: NewBroker and Start serve the broker's gRPC
// services on the bound port (named on the fixed stderr line), and Stop
// releases the log dirs' lock so that the next life opens them.
func TestBrokerServesAndStops(t *testing.T) {
	dir := t.TempDir()
	var stderr syncbuf.Buffer
	b, err := NewBroker(testBrokerConfig(t, dir, &stderr))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if want := ListeningPrefix + b.Addr().String(); !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr %q lacks %q", stderr.String(), want)
	}
	conn, err := grpc.NewClient(b.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", resp, err)
	}
	// A second process on the same dirs is refused while the first runs.
	if _, err := NewBroker(testBrokerConfig(t, dir, &stderr)); err == nil {
		t.Fatal("a second broker opened locked log dirs")
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
	again, err := NewBroker(testBrokerConfig(t, dir, &stderr))
	if err != nil {
		t.Fatalf("the next life: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBrokerOnInjectedFileSystemAndNetwork: with a harness's file system
// and Serve hook, the broker touches neither the OS's files (no dir lock)
// nor a socket, and hands the hook its services.
func TestBrokerOnInjectedFileSystemAndNetwork(t *testing.T) {
	cfg := testBrokerConfig(t, "/sim-data-not-on-this-machine", nil)
	cfg.Stderr = nil
	cfg.FS = crashfs.New()
	var got Services
	cfg.Network.Serve = func(s Services) (net.Addr, error) {
		got = s
		return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 9092}, nil
	}
	cfg.BootID = func() string { return "boot-1" }
	b, err := NewBroker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got.ReplicaManager != b.ReplicaManager() || got.ReplicaManagerService == nil {
		t.Fatalf("Serve got %+v", got)
	}
	if got.ProducerIDs != nil {
		t.Fatal("a standalone broker has no producer IDs")
	}
	if b.Addr().String() != "10.0.0.1:9092" {
		t.Fatalf("Addr %v", b.Addr())
	}
}

// TestBrokerRegistersWithAnInProcessController: the two assemblies
// together, over loopback gRPC: a server.Controller on a Memory store, and
// a server.Broker registering with it; the broker's graceful Stop makes
// its controlled shutdown there.
func TestBrokerRegistersWithAnInProcessController(t *testing.T) {
	ccfg := DefaultControllerConfig()
	ccfg.Listen = "127.0.0.1:0"
	ccfg.MetadataStore = store.NewMemory()
	ccfg.TracerProvider = noop.NewTracerProvider()
	nop := zerolog.Nop()
	ccfg.Logger = &nop
	var cerr syncbuf.Buffer
	ccfg.Stderr = &cerr
	ctl, err := NewController(context.Background(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Stop()
	if err := ctl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cerr.String(), ControllerListeningPrefix) {
		t.Fatalf("controller stderr %q", cerr.String())
	}
	var stderr syncbuf.Buffer
	cfg := testBrokerConfig(t, t.TempDir(), &stderr)
	_, port, _ := net.SplitHostPort(strings.TrimSpace(strings.TrimPrefix(cerr.String(), ControllerListeningPrefix)))
	cfg.Controllers = []string{net.JoinHostPort("127.0.0.1", port)}
	cfg.ControlledShutdownTimeout = 10 * time.Second
	b, err := NewBroker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.ControlledShutdown(context.Background()); err == nil {
		t.Fatal("a controlled shutdown before registering")
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if !b.Registered() || b.BrokerEpoch() == 0 {
			return errors.New("not registered yet")
		}
		return nil
	})
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}
}

// TestControllerThatCannotOpenClosesWhatItOpened: a store that cannot be
// opened (its dir is under a regular file) fails NewController with the
// error, after closing the listener it had bound for --listen HOST:0.
func TestControllerThatCannotOpenClosesWhatItOpened(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultControllerConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.Store = filepath.Join(file, "store")
	cfg.TracerProvider = noop.NewTracerProvider()
	nop := zerolog.Nop()
	cfg.Logger = &nop
	if _, err := NewController(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "--store") {
		t.Fatalf("NewController on a store under a file: %v", err)
	}
}
