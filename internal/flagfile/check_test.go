package flagfile

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"
)

// A duration without a unit names the fix, on the command line and in a
// --config file alike; a valid one is taken as before.
func TestParseDurationHint(t *testing.T) {
	for _, tc := range []struct {
		arg, want string
	}{
		{"5", `invalid value "5" for flag -session-timeout: missing unit in duration; did you mean 5s?`},
		{"1.5", `did you mean 1.5s?`},
		{"-1", `did you mean -1s?`},
		{"5sec", `not a duration: want a number and a unit, e.g. 10s, 1m30s or 500ms`},
	} {
		var v vals
		fs := newFS(&v)
		err := ParseFlags(fs, []string{"--session-timeout", tc.arg})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--session-timeout %s: got %v, want %q", tc.arg, err, tc.want)
		}
	}
	var v vals
	if err := ParseFlags(newFS(&v), []string{"--session-timeout", "250ms"}); err != nil || v.timeout != 250*time.Millisecond {
		t.Fatalf("250ms: %v, %v", err, v.timeout)
	}
	if err := ParseFlags(newFS(&v), []string{"--session-timeout", "0"}); err != nil || v.timeout != 0 {
		t.Fatalf("0 (a valid duration): %v, %v", err, v.timeout)
	}

	fs := newFS(&v)
	if err := ParseFlags(fs, nil); err != nil {
		t.Fatal(err)
	}
	err := Apply(fs, writeFile(t, "session-timeout: 7\n"), opts)
	if err == nil || !strings.Contains(err.Error(), "session-timeout: invalid value \"7\": missing unit in duration; did you mean 7s?") {
		t.Fatalf("config file: %v", err)
	}
}

// The usage printed by -help (or after a bad flag) still names a duration
// flag's argument "duration": the hint's wrapper is not left in place.
func TestParseUsageKeepsTypes(t *testing.T) {
	var v vals
	fs := newFS(&v)
	var out bytes.Buffer
	fs.SetOutput(&out)
	fs.Lookup("session-timeout").Usage = "a broker silent this long is fenced"
	if err := ParseFlags(fs, []string{"-help"}); err != flag.ErrHelp {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(out.String(), "-session-timeout duration") {
		t.Fatalf("usage:\n%s", out.String())
	}
	if _, ok := fs.Lookup("session-timeout").Value.(durationHint); ok {
		t.Fatal("the hint's wrapper is still in place after Parse")
	}
}

func TestAddress(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		listen bool
		want   string // "" valid
	}{
		{"127.0.0.1:9090", false, ""},
		{"localhost:1", false, ""},
		{"[::1]:9090", false, ""},
		{":9091", true, ""},
		{"127.0.0.1:0", true, ""},
		{"127.0.0.1", false, "--controller 127.0.0.1: missing port (want host:port, e.g. 127.0.0.1:9090)"},
		{"127.0.0.1:", false, "--controller 127.0.0.1:: missing port"},
		{"http://127.0.0.1:9090", false, "--controller http://127.0.0.1:9090: a scheme (http://) is not allowed (want host:port"},
		{"dns:///x:9090", false, "a scheme (dns://) is not allowed"},
		{"::1", false, "missing port; an IPv6 host goes in brackets"},
		{"127.0.0.1:http", false, `port "http" is not a number in 1..65535`},
		{"127.0.0.1:0", false, `port "0" is not a number in 1..65535`},
		{"127.0.0.1:70000", true, `port "70000" is not a number in 0..65535`},
		{":9090", false, "missing host"},
		{"", false, "--controller: empty address"},
	} {
		err := Address("controller", tc.addr, "127.0.0.1:9090", tc.listen)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.addr, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: got %v, want %q", tc.addr, err, tc.want)
		}
	}
	addrs, err := AddressList("bootstrap", " 127.0.0.1:9091, ,127.0.0.1:9092", "127.0.0.1:9091", false)
	if err != nil || strings.Join(addrs, ",") != "127.0.0.1:9091,127.0.0.1:9092" {
		t.Fatalf("list: %v %v", addrs, err)
	}
	if _, err := AddressList("bootstrap", "127.0.0.1:9091,127.0.0.1", "127.0.0.1:9091", false); err == nil ||
		!strings.Contains(err.Error(), "--bootstrap 127.0.0.1: missing port") {
		t.Fatalf("list with a bad entry: %v", err)
	}
	if _, err := AddressList("bootstrap", " , ", "127.0.0.1:9091", false); err == nil {
		t.Fatal("a list of no address passed")
	}
}
