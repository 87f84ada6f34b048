package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func configFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "replicad.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBrokerConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := configFile(t, `id: 5
listen: 127.0.0.1:0
log-dirs: [`+dir+`/a, `+dir+`/b]
log-format: json
log-level: debug
min.insync.replicas: 2
replica-lag-time-max: 10s
metrics-log-series: false
tls-principal-rule: ['CN=(.*)->spiffe://replicad/client/$1', 'DNS=(.*)->spiffe://replicad/client/$1']
`)
	cfg, err := parseFlags([]string{"--config", path, "--log-level", "warn"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.brokerID != 5 || cfg.listen != "127.0.0.1:0" || cfg.logFormat != "json" || cfg.minInsyncReplicas != 2 ||
		cfg.replicaLagTimeMax != 10*time.Second || cfg.metricsLogSeries || len(cfg.authz.Rules) != 2 {
		t.Errorf("file not applied: %+v", cfg)
	}
	if len(cfg.logDirs) != 2 || cfg.logDirs[1] != dir+"/b" {
		t.Errorf("log dirs %v", cfg.logDirs)
	}
	if cfg.logLevel != zerolog.WarnLevel {
		t.Errorf("log level %v: --log-level warn on the command line must win over the file's debug", cfg.logLevel)
	}
}

// A value in the file goes through the flag's own checks, and the message
// names the flag, as on the command line.
func TestBrokerConfigFileRefuses(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"log-format: xml\n", "--log-format: want console or json"},
		{"segment-bytes: 10\n", "--segment-bytes: must be at least 1024"},
		{"id: -1\n", "--id: must be in 0.."},
		{"num-replica-fetchers: two\n", `num-replica-fetchers: invalid value "two"`},
		{"listen: 127.0.0.1:9091\nlisen: x\n", `:2: unknown key "lisen"`},
		{"version: true\n", `unknown key "version"`},
		{"replica-lag-time-max: 30\n", `:1: replica-lag-time-max: invalid value "30": missing unit in duration; did you mean 30s?`},
		{"controller: http://127.0.0.1:9090\n", "--controller http://127.0.0.1:9090: a scheme (http://) is not allowed"},
	} {
		_, err := parseFlags([]string{"--config", configFile(t, tc.body)}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.body, err, tc.want)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"--config", configFile(t, "no-such-flag: 1\n")}, io.Discard, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), `unknown key "no-such-flag"`) {
		t.Fatalf("run: exit %d, stderr %q", code, stderr.String())
	}
}

func TestControllerConfigFileRefuses(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"session-timeout: 1ms\n", "--session-timeout: must be at least 100ms"},
		{"leader-imbalance-per-broker-percentage: 200\n", "want 0 to 100"},
		{"store: etcd://\n", "etcd:// needs at least one HOST:PORT"},
		{"tls-client-auth: require\n", "needs --tls-ca"},
		{"min-insync-replicas: 2\n", `unknown key "min-insync-replicas"`},
	} {
		var stderr bytes.Buffer
		if code := dispatch([]string{"controller", "--config", configFile(t, tc.body)}, io.Discard, &stderr); code != 2 ||
			!strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.body, code, stderr.String(), tc.want)
		}
	}
	// The command line overrides the file: a bad value in the file is not
	// looked at when the flag is given.
	var stderr bytes.Buffer
	if code := dispatch([]string{"controller", "--config", configFile(t, "session-timeout: 1ms\nlisten: bad\n"), "--session-timeout", "6s"},
		io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "--listen bad: missing port") || strings.Contains(stderr.String(), "session-timeout") {
		t.Errorf("override: exit %d, stderr %q", code, stderr.String())
	}
}

// The example files under deploy/config are valid as they stand.
func TestExampleConfigFiles(t *testing.T) {
	cfg, err := parseFlags([]string{"--config", "../../deploy/config/broker.yaml"}, io.Discard)
	if err != nil {
		t.Fatalf("deploy/config/broker.yaml: %v", err)
	}
	if cfg.brokerID != 1 || cfg.controller == "" || cfg.metricsListen == "" {
		t.Errorf("broker.yaml gave %+v", cfg)
	}
	ctl, err := parseControllerFlags([]string{"--config", "../../deploy/config/controller.yaml"}, io.Discard)
	if err != nil {
		t.Fatalf("deploy/config/controller.yaml: %v", err)
	}
	if ctl.Store != "/var/lib/replicad/controller" || ctl.SessionTimeout != 6*time.Second || ctl.LogFormat != "json" {
		t.Errorf("controller.yaml gave %+v", ctl)
	}
}
