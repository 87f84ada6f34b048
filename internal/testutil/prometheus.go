package testutil

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// PrometheusBinEnv and PromtoolBinEnv name the Prometheus and promtool
// binaries to run instead of bin/prometheus and bin/promtool. When one is
// set the binary must exist: `make test` sets both, so CI fails instead of
// skipping when a binary is missing.
const (
	PrometheusBinEnv = "REPLICAD_PROMETHEUS_BIN"
	PromtoolBinEnv   = "REPLICAD_PROMTOOL_BIN"
)

// prometheusReadyTimeout bounds Prometheus's start (well under a second on
// an empty TSDB usually).
const prometheusReadyTimeout = 60 * time.Second

// RepoFile is the absolute path of rel, relative to the module root.
func RepoFile(t testing.TB, rel string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

// PromtoolBin is the promtool binary (built into bin/ by `make
// prometheus`), or the test is skipped, saying how to build one.
func PromtoolBin(t testing.TB) string {
	t.Helper()
	return toolBin(t, PromtoolBinEnv, "promtool")
}

// toolBin finds a binary of the Prometheus build: env's path, which must
// exist, or bin/name, whose absence skips the test.
func toolBin(t testing.TB, env, name string) string {
	t.Helper()
	if bin := os.Getenv(env); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("%s=%s: %v (run `make prometheus` to build it)", env, bin, err)
		}
		return bin
	}
	bin := RepoFile(t, filepath.Join("bin", name))
	if _, err := os.Stat(bin); errors.Is(err, os.ErrNotExist) {
		t.Skipf("no %s binary at %s: run `make prometheus` (or `make test`, which builds it) to build it once "+
			"(several minutes from a cold Go cache), or point %s at one", name, bin, env)
	} else if err != nil {
		t.Fatal(err)
	}
	return bin
}

// StartPrometheus runs a real Prometheus (3.16.0, built into bin/prometheus
// by `make prometheus`) on a free loopback port with config (prometheus.yml
// text; relative rule_files are found in dir) and an empty TSDB of its own,
// waits until it is ready, and returns its base URL
// (http://127.0.0.1:PORT, where /api/v1 is). It stops at cleanup; its
// output is logged if the test failed. Without a binary the test is
// skipped, saying how to build one.
func StartPrometheus(t testing.TB, dir, config string) string {
	t.Helper()
	bin := toolBin(t, PrometheusBinEnv, "prometheus")
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	// A port found free may be taken again before Prometheus binds it: retry.
	for range 3 {
		addr := freeHostPort(t)
		p, err := startPrometheus(t, bin, cfgPath, filepath.Join(dir, "tsdb-"+addr), addr)
		if err == nil {
			return "http://" + addr
		}
		lastErr = err
		if p.Running() {
			p.Kill()
			t.Fatalf("prometheus: %v\noutput:\n%s", err, p.Stderr())
		}
		t.Logf("prometheus did not start (retrying on another port): %v\noutput:\n%s", err, p.Stderr())
	}
	t.Fatalf("start prometheus: %v", lastErr)
	return ""
}

func startPrometheus(t testing.TB, bin, config, tsdb, addr string) (*Broker, error) {
	t.Helper()
	cmd := exec.Command(bin, "--config.file", config, "--storage.tsdb.path", tsdb,
		"--web.listen-address", addr, "--log.level", "warn",
		// A test's series never need more than minutes of history.
		"--storage.tsdb.retention.time", "1h")
	p, err := startHelper(t, cmd, "prometheus")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(prometheusReadyTimeout)
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if !p.Running() {
			return p, fmt.Errorf("exited with status %d before it was ready", p.exitCode)
		}
		if resp, err := client.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("not ready within %v on %s", prometheusReadyTimeout, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
