package main

import (
	"strings"
	"testing"
	"time"
)

// An address without a port or with a scheme is refused at parse time,
// exit 2, nothing dialed: before, --controller 127.0.0.1 dialed
// 127.0.0.1:443 and waited out --timeout.
func TestAddressFlagsRefusedAtOnce(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--controller", "127.0.0.1", "list-topics"}, "--controller 127.0.0.1: missing port (want host:port, e.g. 127.0.0.1:9090)"},
		{[]string{"list-topics", "--controller", "http://127.0.0.1:9090"}, "--controller http://127.0.0.1:9090: a scheme (http://) is not allowed"},
		{[]string{"--controller", "127.0.0.1:9090,127.0.0.1", "describe-cluster"}, "--controller 127.0.0.1: missing port"},
		{[]string{"--broker", "127.0.0.1", "describe"}, "--broker 127.0.0.1: missing port (want host:port, e.g. 127.0.0.1:9091)"},
		{[]string{"--broker", "https://broker1:9091", "describe"}, "--broker https://broker1:9091: a scheme (https://) is not allowed"},
		{[]string{"--bootstrap", "localhost", "produce", "--topic", "t", "--partition", "0", "--value", "v"}, "--bootstrap localhost: missing port"},
		{[]string{"--bootstrap", "127.0.0.1:0", "consume", "--topic", "t", "--partition", "0"}, `--bootstrap 127.0.0.1:0: port "0" is not a number in 1..65535`},
	} {
		start := time.Now()
		r := ctl(t, defaultBroker, "", append([]string{"--timeout", "30s"}, tc.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%v: took %v: something was dialed", tc.args, el)
		}
	}
}

// An address from the environment is checked the same, and the error says
// where it came from; --live-broker's ID=HOST:PORT too.
func TestAddressFromEnvironment(t *testing.T) {
	r := ctl(t, "127.0.0.1", "", "describe")
	if r.code != 2 || !strings.Contains(r.stderr, "--broker 127.0.0.1: missing port (want host:port, e.g. 127.0.0.1:9091) (the value comes from CTLCLIENT_BROKER)") {
		t.Errorf("CTLCLIENT_BROKER=127.0.0.1: exit %d, stderr %q", r.code, r.stderr)
	}
	r = ctl(t, "", "", "update-metadata", "--controller-id", "1", "--controller-epoch", "1", "--live-broker", "1=http://127.0.0.1:9091")
	if r.code != 2 || !strings.Contains(r.stderr, "a scheme (http://) is not allowed") {
		t.Errorf("--live-broker with a scheme: exit %d, stderr %q", r.code, r.stderr)
	}
}

// A duration without a unit names the fix, for the global --timeout and
// for every command's duration flags alike.
func TestDurationWithoutUnit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "5", "describe"}, `invalid value "5" for flag -timeout: missing unit in duration; did you mean 5s?`},
		{[]string{"describe", "--timeout", "5"}, `invalid value "5" for flag -timeout: missing unit in duration; did you mean 5s?`},
		{[]string{"cluster", "health", "--watch", "--interval", "2"}, `flag -interval: missing unit in duration; did you mean 2s?`},
		{[]string{"delete-records", "--wait", "1.5"}, `flag -wait: missing unit in duration; did you mean 1.5s?`},
		{[]string{"describe", "--timeout", "5 sec"}, `flag -timeout: not a duration: want a number and a unit`},
	} {
		r := ctl(t, "", "", tc.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	// The help still names a duration flag's argument.
	r := ctl(t, "", "", "describe", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "-timeout duration") {
		t.Fatalf("describe --help: exit %d\n%s", r.code, r.stdout)
	}
}

// help --markdown and --markdown-errors print the reference pages: every
// command with its own flags, every error code.
func TestHelpMarkdown(t *testing.T) {
	r := ctl(t, "", "", "help", "--markdown")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, c := range commands() {
		if !strings.Contains(r.stdout, "\n### ctlclient "+c.name+"\n") {
			t.Errorf("no section for %s", c.name)
		}
	}
	for _, want := range []string{"### Global flags", "| `--timeout duration` | `10s` |", "| `-o format` | `table` |"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("no %q", want)
		}
	}
	r = ctl(t, "", "", "help", "--markdown-errors")
	if r.code != 0 || !strings.Contains(r.stdout, "| 6 | NOT_LEADER_OR_FOLLOWER | yes |") {
		t.Fatalf("errors: exit %d\n%s", r.code, r.stdout)
	}
}
