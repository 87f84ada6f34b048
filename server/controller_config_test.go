package server

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/controller"
)

func parse(t *testing.T, args ...string) (ControllerConfig, error) {
	t.Helper()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var c ControllerConfig
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestDefaults(t *testing.T) {
	c, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:9090" || c.Store != DefaultControllerStore || c.SessionTimeout != controller.DefaultSessionTimeout ||
		c.ElectionTTL != 5*time.Second || !c.AutoRebalance || c.LogFormat != "console" || c.LogLevel != "info" {
		t.Fatalf("defaults %+v", c)
	}
}

// Every mistake is a UsageError naming its flag (the commands print it
// with their usage hint and exit 2).
func TestValidateNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "9090"}, "--listen 9090: missing port (want host:port, e.g. 127.0.0.1:9090)"},
		{[]string{"--listen", "http://127.0.0.1:9090"}, "--listen http://127.0.0.1:9090: a scheme (http://) is not allowed"},
		{[]string{"--metrics-listen", "127.0.0.1"}, "--metrics-listen 127.0.0.1: missing port"},
		{[]string{"--store", "etcd://127.0.0.1:2379,127.0.0.1"}, "--store 127.0.0.1: missing port (want host:port, e.g. etcd://127.0.0.1:2379)"},
		{[]string{"--store", ""}, "--store: must not be empty"},
		{[]string{"--store", "etcd://, ,"}, "--store: etcd:// needs at least one HOST:PORT"},
		{[]string{"--session-timeout", "50ms"}, "--session-timeout: must be at least 100ms"},
		{[]string{"--election-ttl", "500ms"}, "--election-ttl: must be at least 1s"},
		{[]string{"--id", "-1"}, "--id: must not be negative"},
		{[]string{"--leader-imbalance-check-interval", "1ms"}, "--leader-imbalance-check-interval: must be at least 10ms"},
		{[]string{"--leader-imbalance-per-broker-percentage", "-1"}, "--leader-imbalance-per-broker-percentage: want 0 to 100"},
		{[]string{"--log-level", "loud"}, "--log-level: want debug, info, warn or error"},
		{[]string{"--log-format", "xml"}, "--log-format: want console or json"},
		{[]string{"--super-users", "admin"}, "--super-users:"},
	} {
		_, err := parse(t, tc.args...)
		var uerr UsageError
		if !errors.As(err, &uerr) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a UsageError with %q", tc.args, err, tc.want)
		}
	}
	if _, err := parse(t, "--id", "4294967296"); err == nil || !strings.Contains(err.Error(), "want a 32-bit integer") {
		t.Errorf("--id 2^32: %v", err)
	}
	c, err := parse(t, "--tls-principal-rule", "CN=(.*)->spiffe://replicad/client/$1", "--tls-principal-rule", "DNS=(.*)->spiffe://x/$1")
	if err != nil || len(c.Authz.Rules) != 2 {
		t.Fatalf("repeated --tls-principal-rule: %v %v", c.Authz.Rules, err)
	}
}

// TestMetricsFlags: --metrics-listen is off by default, takes HOST:PORT,
// and a bad value or --metrics-tls without a certificate is a usage error
// naming the flag.
func TestMetricsFlags(t *testing.T) {
	if c, err := parse(t); err != nil || c.MetricsListen != "" || c.MetricsTLS {
		t.Fatalf("metrics on by default: %+v %v", c, err)
	}
	if c, err := parse(t, "--metrics-listen", "127.0.0.1:0"); err != nil || c.MetricsListen != "127.0.0.1:0" {
		t.Fatalf("--metrics-listen 127.0.0.1:0: %+v %v", c, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-listen", "nope"}, "--metrics-listen"},
		{[]string{"--metrics-tls"}, "--metrics-tls"},
		{[]string{"--metrics-listen", "127.0.0.1:0", "--metrics-tls"}, "--metrics-tls"},
	} {
		_, err := parse(t, tc.args...)
		var ue UsageError
		if !errors.As(err, &ue) || !strings.HasPrefix(ue.Msg, tc.want) {
			t.Errorf("%v: %v, want a usage error naming %s", tc.args, err, tc.want)
		}
	}
}
