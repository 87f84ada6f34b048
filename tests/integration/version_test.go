package integration

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/replicad/replicad/internal/version"
)

// git runs git in the module and returns its trimmed output.
func git(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		t.Skipf("git %v: %v (not a git checkout?)", args, err)
	}
	return strings.TrimSpace(string(out))
}

// TestVersionCommands builds both binaries as make build does (with
// scripts/version-ldflags.sh) and checks that replicad --version,
// replicad version -o json, replicad controller --version and ctlclient
// version tell the commit git has checked out, its date and the modified bit.
func TestVersionCommands(t *testing.T) {
	head := git(t, "rev-parse", "HEAD")
	date := git(t, "-c", "log.showSignature=false", "show", "-s", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "--format=%cd", "HEAD")
	root := git(t, "rev-parse", "--show-toplevel")
	ldflags, err := exec.Command(filepath.Join(root, "scripts", "version-ldflags.sh")).Output()
	if err != nil {
		t.Fatalf("version-ldflags.sh: %v", err)
	}
	dir := t.TempDir()
	build := func(pkg, out string) string {
		args := []string{"build", "-buildvcs=auto", "-ldflags", strings.TrimSpace(string(ldflags)), "-o", filepath.Join(dir, out)}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, b)
		}
		return filepath.Join(dir, out)
	}
	replicad, ctlclient := build("./cmd/replicad", "replicad"), build("./cmd/ctlclient", "ctlclient")
	// git status after the build: the build itself writes nothing tracked.
	modified := git(t, "status", "--porcelain") != ""

	run := func(bin string, args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
		}
		return string(out)
	}
	var infos []version.Info
	for _, c := range [][]string{{replicad, "version", "-o", "json"}, {ctlclient, "version", "-o", "json"}} {
		var info version.Info
		out := run(c[0], c[1:]...)
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", c, err, out)
		}
		if info.Commit != head || info.Date != date || info.Modified != modified {
			t.Errorf("%s: commit %s date %s modified %v; git says %s %s %v", filepath.Base(c[0]), info.Commit, info.Date, info.Modified, head, date, modified)
		}
		if !strings.Contains(info.Version, head[:12]) && !strings.HasPrefix(info.Version, "v") {
			t.Errorf("version %q: want a tag or a pseudo-version naming %s", info.Version, head[:12])
		}
		if info.GoVersion != runtime.Version() {
			t.Errorf("goVersion %q, want %q", info.GoVersion, runtime.Version())
		}
		infos = append(infos, info)
	}
	line := infos[0].String("replicad")
	for _, args := range [][]string{{"--version"}, {"controller", "--version"}} {
		if got := strings.TrimSpace(run(replicad, args...)); got != line {
			t.Errorf("replicad %v = %q, want %q", args, got, line)
		}
	}
	if got, want := strings.TrimSpace(run(ctlclient, "version")), infos[1].String("ctlclient"); got != want || !strings.Contains(got, head[:12]) {
		t.Errorf("ctlclient version = %q, want %q naming %s", got, want, head[:12])
	}
}
