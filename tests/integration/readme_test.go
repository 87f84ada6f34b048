package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// The README's walkthrough is a path a new user follows top to bottom:
// this test extracts the shell blocks of its sections and runs them, in
// order, as written, against fresh processes, so the README cannot drift
// from the product. Conventions it relies on (and the README follows):
//   - a line running ./bin/replicad (a broker, or `replicad controller`) is a
//     daemon "in its own terminal": started in the background, waited for
//     until it says it listens, stopped at the end (its pid is exported as
//     CONTROLLER_PID for a controller);
//   - `make ...` lines are skipped (the binaries are built already);
//   - every other line runs in bash with -e -o pipefail and must exit 0,
//     unless the block is marked <!-- readme-test: fails -->;
//   - exports stay set for the blocks after them in the same path;
//   - the README's 127.0.0.1:90xx addresses get free ports here.
var readmePaths = [][]string{
	{"Walkthrough", "The same with grpcurl"},
	{"A cluster with a controller", "Exactly once per partition: idempotent produce", "Finding leaders without the controller"},
	{"Reproducing a figure"},
}

type readmeBlock struct {
	section string
	fails   bool
	lines   []string // continuation lines joined
}

// readmeBlocks are the ```sh blocks of the sections named, in README order.
func readmeBlocks(t *testing.T, sections []string) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, s := range sections {
		want[s] = true
	}
	var out []readmeBlock
	section, prev := "", ""
	var cur *readmeBlock
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			if n := len(cur.lines); n > 0 && strings.HasSuffix(cur.lines[n-1], "\\") {
				cur.lines[n-1] += "\n" + line
			} else {
				cur.lines = append(cur.lines, line)
			}
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case line == "```sh" && want[section]:
			cur = &readmeBlock{section: section, fails: prev == "<!-- readme-test: fails -->"}
		}
		prev = line
	}
	if len(out) == 0 {
		t.Fatalf("no shell blocks in README sections %v", sections)
	}
	return out
}

// readmeRun is one path's processes and shell state.
type readmeRun struct {
	t       *testing.T
	dir     string
	ports   map[string]string
	exports []string
	env     []string
	daemons int
}

var readmeAddr = regexp.MustCompile(`127\.0\.0\.1:(9\d\d\d)`)

func (r *readmeRun) rewrite(line string) string {
	return readmeAddr.ReplaceAllStringFunc(line, func(a string) string {
		if p, ok := r.ports[a]; ok {
			return p
		}
		r.ports[a] = freeAddr(r.t)
		return r.ports[a]
	})
}

// daemon starts line in the background and waits until it listens.
func (r *readmeRun) daemon(line string) {
	r.t.Helper()
	r.daemons++
	logPath := filepath.Join(r.dir, fmt.Sprintf("daemon-%d.log", r.daemons))
	logFile, err := os.Create(logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", "exec "+line)
	cmd.Dir, cmd.Stdout, cmd.Stderr = r.dir, logFile, logFile
	cmd.Env = append(os.Environ(), r.env...)
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		// The path is over and its dirs are temporary: no controlled
		// shutdown (which, with the controller killed, would wait its
		// timeout), a kill.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logFile.Close()
	})
	if strings.Contains(line, " controller ") {
		r.env = append(r.env, fmt.Sprintf("CONTROLLER_PID=%d", cmd.Process.Pid))
	}
	testutil.Eventually(r.t, 30*time.Second, func() error {
		b, _ := os.ReadFile(logPath)
		if !strings.Contains(string(b), "listening on") {
			return fmt.Errorf("%q has not said it listens yet:\n%s", line, b)
		}
		return nil
	})
}

// script runs lines in bash and checks its exit status.
func (r *readmeRun) script(b readmeBlock, lines []string) {
	r.t.Helper()
	body := strings.Join(append(append([]string{}, r.exports...), lines...), "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", body)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), r.env...)
	out, err := cmd.CombinedOutput()
	switch {
	case b.fails && err == nil:
		r.t.Fatalf("README section %q: a block marked to fail succeeded:\n%s\n--- output:\n%s", b.section, body, out)
	case !b.fails && err != nil:
		r.t.Fatalf("README section %q: %v running\n%s\n--- output:\n%s", b.section, err, body, out)
	}
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "export ") {
			r.exports = append(r.exports, l)
		}
	}
}

func TestReadmeWalkthroughRunsAsWritten(t *testing.T) {
	grpcurl := os.Getenv("REPLICAD_GRPCURL_BIN")
	if grpcurl == "" {
		grpcurl, _ = filepath.Abs("../../bin/grpcurl")
	}
	if _, err := os.Stat(grpcurl); err != nil {
		if os.Getenv("REPLICAD_GRPCURL_BIN") != "" {
			t.Fatalf("REPLICAD_GRPCURL_BIN: %v", err)
		}
		t.Skipf("no grpcurl at %s (make tools builds it)", grpcurl)
	}
	for _, sections := range readmePaths {
		t.Run(sections[0], func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, src := range map[string]string{"replicad": bins.Replicad, "ctlclient": bins.Ctlclient, "grpcurl": grpcurl} {
				if err := os.Symlink(src, filepath.Join(dir, "bin", name)); err != nil {
					t.Fatal(err)
				}
			}
			r := &readmeRun{t: t, dir: dir, ports: map[string]string{}}
			for _, b := range readmeBlocks(t, sections) {
				var lines []string
				for _, raw := range b.lines {
					line := r.rewrite(raw)
					trimmed := strings.TrimSpace(line)
					switch {
					case trimmed == "" || strings.HasPrefix(trimmed, "#"):
					case strings.HasPrefix(trimmed, "make "):
					case strings.HasPrefix(trimmed, "./bin/replicad ") && !strings.Contains(trimmed, "version"):
						r.daemon(strings.TrimSuffix(trimmed, "&"))
					default:
						lines = append(lines, line)
					}
				}
				if len(lines) > 0 {
					r.script(b, lines)
					t.Logf("ran a block of %q: %d commands", b.section, len(lines))
				}
			}
		})
	}
}
