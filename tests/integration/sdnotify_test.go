package integration

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/replicad/replicad/internal/testutil"
)

// TestSystemdNotify runs a broker and `replicad controller` as a
// Type=notify unit would: with $NOTIFY_SOCKET, each sends READY=1 once it
// serves (the socket's datagram comes after the listening line) and
// STOPPING=1 on SIGTERM before it exits 0.
func TestSystemdNotify(t *testing.T) {
	for _, daemon := range []string{"broker", "controller"} {
		t.Run(daemon, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "notify")
			sock, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()
			env := []string{"NOTIFY_SOCKET=" + path}
			var p *testutil.Broker
			if daemon == "broker" {
				p = testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 1, LogDirs: []string{t.TempDir()}, Env: env})
			} else {
				p = testutil.StartServerController(t, bins.Replicad, env, "--listen", "127.0.0.1:0", "--store", t.TempDir())
			}
			if got := readDatagram(t, sock); got != "READY=1" {
				t.Fatalf("first notification %q, want READY=1", got)
			}
			// Ready means serving: a health check answers.
			conn := p.Dial(t)
			h, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{})
			if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("health check after READY=1: %v %v", h, err)
			}
			done := make(chan int, 1)
			go func() { done <- p.Terminate(30 * time.Second) }()
			if got := readDatagram(t, sock); got != "STOPPING=1" {
				t.Fatalf("notification on SIGTERM %q, want STOPPING=1", got)
			}
			if code := <-done; code != 0 {
				t.Fatalf("exit %d after SIGTERM", code)
			}
		})
	}
}

func readDatagram(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}
