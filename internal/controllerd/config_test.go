package controllerd

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
)

// parse is the daemon's flags over args, as the commands parse them.
func parse(t *testing.T, args ...string) Config {
	t.Helper()
	var c Config
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return c
}

// TestMetricsFlags: --metrics-listen is off by default, takes HOST:PORT,
// and a bad value or --metrics-tls without a certificate is a usage error
// naming the flag.
func TestMetricsFlags(t *testing.T) {
	if c := parse(t); c.MetricsListen != "" || c.MetricsTLS {
		t.Fatalf("metrics on by default: %+v", c)
	}
	if err := parse(t, "--metrics-listen", "127.0.0.1:0").Validate(); err != nil {
		t.Fatalf("--metrics-listen 127.0.0.1:0: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-listen", "nope"}, "--metrics-listen"},
		{[]string{"--metrics-tls"}, "--metrics-tls"},
		{[]string{"--metrics-listen", "127.0.0.1:0", "--metrics-tls"}, "--metrics-tls"},
	} {
		err := parse(t, tc.args...).Validate()
		var ue UsageError
		if !errors.As(err, &ue) || !strings.HasPrefix(ue.Msg, tc.want) {
			t.Errorf("%v: %v, want a usage error naming %s", tc.args, err, tc.want)
		}
	}
}
