package testutil

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// JaegerBinEnv names the Jaeger binary to run instead of bin/jaeger. When it
// is set the binary must exist: `make test` sets it, so CI fails instead of
// skipping when the binary is missing.
const JaegerBinEnv = "REPLICAD_JAEGER_BIN"

// jaegerReadyTimeout bounds Jaeger's start (a few hundred ms usually).
const jaegerReadyTimeout = 60 * time.Second

// StartJaeger runs a real Jaeger (v1.76.0, built into bin/jaeger by `make
// jaeger-build`, configured by tools/jaeger/config.yaml: in-memory storage)
// on free loopback ports and returns the OTLP/gRPC endpoint, as
// OTEL_EXPORTER_OTLP_ENDPOINT takes it (http://127.0.0.1:PORT), and the base
// URL of the query HTTP API (http://127.0.0.1:PORT, where /api/traces is).
// It stops at cleanup. Without a binary the test is skipped, saying how to
// build one.
func StartJaeger(t testing.TB) (otlpEndpoint, queryURL string) {
	t.Helper()
	bin, config := jaegerFiles(t)
	var lastErr error
	// A port found free may be taken again before Jaeger binds it: retry.
	for range 3 {
		otlp, queryHTTP, queryGRPC := freeHostPort(t), freeHostPort(t), freeHostPort(t)
		j, err := startJaeger(t, bin, config, otlp, queryHTTP, queryGRPC)
		if err == nil {
			return "http://" + otlp, "http://" + queryHTTP
		}
		lastErr = err
		if j == nil {
			t.Fatalf("jaeger: %v", err)
		}
		if j.Running() {
			j.Kill()
			t.Fatalf("jaeger: %v\noutput:\n%s", err, j.Stderr())
		}
		t.Logf("jaeger did not start (retrying on other ports): %v\noutput:\n%s", err, j.Stderr())
	}
	t.Fatalf("start jaeger: %v", lastErr)
	return "", ""
}

// jaegerFiles finds the binary and its config, or skips the test.
func jaegerFiles(t testing.TB) (bin, config string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(root, "tools", "jaeger", "config.yaml")
	if _, err := os.Stat(config); err != nil {
		t.Fatalf("jaeger config: %v", err)
	}
	if bin = os.Getenv(JaegerBinEnv); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s=%s: %v (run `make jaeger-build` to build it)", JaegerBinEnv, bin, err)
		}
		return bin, config
	}
	bin = filepath.Join(root, "bin", "jaeger")
	if _, err := os.Stat(bin); errors.Is(err, os.ErrNotExist) {
		t.Skipf("no Jaeger binary at %s: run `make jaeger-build` (or `make test`, which builds it) to build it once, or point %s at one", bin, JaegerBinEnv)
	} else if err != nil {
		t.Fatal(err)
	}
	return bin, config
}

func startJaeger(t testing.TB, bin, config, otlp, queryHTTP, queryGRPC string) (*Broker, error) {
	t.Helper()
	cmd := exec.Command(bin, "--config", config)
	cmd.Env = append(os.Environ(),
		"JAEGER_OTLP_GRPC="+otlp, "JAEGER_QUERY_HTTP="+queryHTTP, "JAEGER_QUERY_GRPC="+queryGRPC,
		"JAEGER_LOG_LEVEL=warn", "JAEGER_MAX_TRACES=10000")
	j, err := startHelper(t, cmd, "jaeger")
	if err != nil {
		return nil, err
	}

	// Ready: the query API answers and the OTLP receiver accepts connections.
	deadline := time.Now().Add(jaegerReadyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if !j.Running() {
			return j, fmt.Errorf("exited with status %d before it was ready", j.exitCode)
		}
		ready := false
		if resp, err := client.Get("http://" + queryHTTP + "/api/services"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if c, err := net.DialTimeout("tcp", otlp, time.Second); err == nil {
					c.Close()
					ready = true
				}
			}
		}
		if ready {
			return j, nil
		}
		if time.Now().After(deadline) {
			return j, fmt.Errorf("not ready within %v (query %s, otlp %s)", jaegerReadyTimeout, queryHTTP, otlp)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeHostPort is a 127.0.0.1:PORT free a moment ago.
func freeHostPort(t testing.TB) string {
	u := FreeURL(t)
	return u.Host
}

// startHelper starts a helper process (Jaeger, Prometheus) for t: stdout
// and stderr go to one buffer, shown when t fails; it is sent SIGTERM (then
// killed after 10 s) at cleanup.
func startHelper(t testing.TB, cmd *exec.Cmd, name string) (*Broker, error) {
	t.Helper()
	p := &Broker{t: t, stderr: &syncBuffer{}, listenC: make(chan string, 1), exited: make(chan struct{}), cmd: cmd}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		p.scanStderr(pipe)
	}()
	go func() {
		<-copied
		p.exitCode = ExitCode(cmd.Wait())
		close(p.exited)
	}()
	t.Cleanup(func() {
		if p.Running() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if _, ok := p.Wait(10 * time.Second); !ok {
				p.Kill()
			}
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.Stderr())
		}
	})
	return p, nil
}
