package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replicad/replicad/internal/dirlock"
	"github.com/replicad/replicad/internal/version"
)

func TestDispatchVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := dispatch([]string{"--version"}, &out, &errOut); code != 0 || strings.TrimSpace(out.String()) != version.Get().String("replicad") {
		t.Fatalf("--version: exit %d, %q %q", code, out.String(), errOut.String())
	}
	// --version wins over flags that would not validate.
	out.Reset()
	if code := dispatch([]string{"--log-format", "xml", "--version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "replicad ") {
		t.Fatalf("--version with a bad flag: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := dispatch([]string{"version", "-o", "json"}, &out, &errOut); code != 0 {
		t.Fatalf("version -o json: exit %d, %s", code, errOut.String())
	}
	var info version.Info
	if err := json.Unmarshal(out.Bytes(), &info); err != nil || info.GoVersion == "" {
		t.Fatalf("version -o json: %v %+v\n%s", err, info, out.String())
	}
	errOut.Reset()
	if code := dispatch([]string{"version", "-o", "yaml"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-o: want table or json") {
		t.Fatalf("version -o yaml: exit %d, %s", code, errOut.String())
	}
}

// replicad controller refuses a bad flag value like ctlclient controller
// run does, naming the flag, before it opens anything.
func TestDispatchControllerUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"controller", "--listen", "nowhere"}, "--listen nowhere: missing port"},
		{[]string{"controller", "--session-timeout", "6"}, `invalid value "6" for flag -session-timeout: missing unit in duration; did you mean 6s?`},
		{[]string{"controller", "--leader-imbalance-per-broker-percentage", "101"}, "--leader-imbalance-per-broker-percentage: want 0 to 100"},
		{[]string{"controller", "--store", "etcd://"}, "--store: etcd:// needs at least one HOST:PORT"},
		{[]string{"controller", "--tls-client-auth", "require"}, "needs --tls-ca"},
		{[]string{"controller", "--id", "99999999999"}, "want a 32-bit integer"},
		{[]string{"controller", "extra"}, `unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		if code := dispatch(tc.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
	var out, errOut bytes.Buffer
	if code := dispatch([]string{"controller", "--help"}, &out, &errOut); code != 0 ||
		!strings.Contains(errOut.String(), "Usage: replicad controller [flags]") || !strings.Contains(errOut.String(), "-session-timeout") {
		t.Fatalf("controller --help: exit %d\n%s", code, errOut.String())
	}
}

// A bare `replicad` says what it starts, on the defaults, before anything
// else: here the log dir is held by the test, so it then refuses to start.
func TestNoFlagsAnnouncesTheBroker(t *testing.T) {
	t.Chdir(t.TempDir())
	dir, err := filepath.Abs("data/broker-1")
	if err != nil {
		t.Fatal(err)
	}
	lock, _, err := dirlock.Acquire([]string{dir}, "the test")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	var out, errOut bytes.Buffer
	code := dispatch(nil, &out, &errOut)
	first, _, _ := strings.Cut(errOut.String(), "\n")
	want := "replicad: starting a broker with id 1 on 127.0.0.1:9091, log dir " + dir +
		" (no --config or flags given; 'replicad --help' lists them, 'replicad controller' starts a controller)"
	if code != 1 || first != want {
		t.Fatalf("exit %d, first stderr line\n%q\nwant\n%q\n%s", code, first, want, errOut.String())
	}
	// With any flag it says nothing of the kind.
	errOut.Reset()
	if code := dispatch([]string{"--log-format", "xml"}, &out, &errOut); code != 2 || strings.Contains(errOut.String(), "starting a broker") {
		t.Fatalf("with a flag: exit %d, %s", code, errOut.String())
	}
}

// replicad --help-markdown prints both daemons' flags from their flag
// sets, the same on every machine (no RLIMIT_NOFILE figure, no
// REPLICAD_TLS_* default).
func TestHelpMarkdown(t *testing.T) {
	savedEnv, savedMax := getenv, defaultMaxPartitions
	defer func() { getenv, defaultMaxPartitions = savedEnv, savedMax }()
	getenv = func(k string) string { return "/from/the/environment" }
	var pages []string
	for _, n := range []int{1000, 80000} {
		defaultMaxPartitions = func() int { return n }
		var out bytes.Buffer
		if code := dispatch([]string{"--help-markdown"}, &out, io.Discard); code != 0 {
			t.Fatalf("exit %d", code)
		}
		pages = append(pages, out.String())
	}
	page := pages[0]
	if pages[1] != page {
		t.Fatal("the page depends on RLIMIT_NOFILE")
	}
	for _, want := range []string{
		"## replicad (broker)", "| `--listen string` | `127.0.0.1:9091` |", "| `--hw-checkpoint-interval duration` | `5s` |",
		"| `--max-partitions int` | `" + maxPartitionsDefaultRule + "` |",
		"## replicad controller", "| `--session-timeout duration` | `6s` |",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q in\n%s", want, page)
		}
	}
	if strings.Contains(page, "/from/the/environment") || strings.Contains(page, fmt.Sprintf("(%d here)", openFilesLimit())) {
		t.Errorf("the page shows this machine's environment:\n%s", page)
	}
}
