package main

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/replicad/replicad/internal/version"
)

// ctlclient version contacts nothing (the broker address is unreachable)
// and prints every field in JSON.
func TestVersionCommand(t *testing.T) {
	r := ctl(t, "127.0.0.1:1", "", "version", "-o", "json")
	if r.code != 0 {
		t.Fatalf("version -o json: exit %d, stderr %s", r.code, r.stderr)
	}
	var info version.Info
	if err := json.Unmarshal([]byte(r.stdout), &info); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if info.GoVersion != runtime.Version() || info.Commit == "" || info.Version == "" || info.Date == "" {
		t.Fatalf("version info %+v", info)
	}
	r = ctl(t, "127.0.0.1:1", "", "version")
	if r.code != 0 || strings.TrimSpace(r.stdout) != version.Get().String("ctlclient") {
		t.Fatalf("version: exit %d, %q", r.code, r.stdout)
	}
	if r := ctl(t, "127.0.0.1:1", "", "version", "extra"); r.code != exitUsage {
		t.Fatalf("version extra: exit %d, want %d", r.code, exitUsage)
	}
}

// The old daemon command says it is an alias of replicad controller.
func TestControllerRunHelpNamesTheServerCommand(t *testing.T) {
	r := ctl(t, "127.0.0.1:1", "", "controller", "run", "--help")
	if r.code != 0 || !strings.Contains(r.stdout, "alias of 'replicad controller'") || !strings.Contains(r.stdout, "--leader-imbalance-check-interval") {
		t.Fatalf("controller run --help: exit %d\n%s", r.code, r.stdout)
	}
	if r := ctl(t, "127.0.0.1:1", "", "controller", "run", "--session-timeout", "1ms"); r.code != exitUsage ||
		!strings.Contains(r.stderr, "--session-timeout: must be at least 100ms") {
		t.Fatalf("bad --session-timeout: exit %d, stderr %s", r.code, r.stderr)
	}
}
