package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
	"github.com/replicad/replicad/tests/docs"
)

// The docs are paths a reader follows top to bottom (README.md's tour,
// docs/getting-started.md's walkthroughs, ...): this test runs the shell
// blocks of every path in tests/docs/paths.go, in order, as written, against
// fresh processes, and checks the outputs the pages show, so the docs cannot
// drift from the product. tests/docs checks (without processes) that every
// shell block is in a path or marked not run with a reason, and the links.
//
// How to mark a page (the full list is tests/docs/doc.go's comment):
//
//	<!-- docs-test: not run: needs podman -->   before a block no path runs
//	<!-- docs-test: fails -->                   before a block that must exit non-zero
//	<!-- docs-test: output -->                  before the fence right after a shell
//	                                            block: its lines must appear in the
//	                                            output, in order ("..." any text,
//	                                            <PID> one word)
//	<!-- docs-test: output eventually -->       the same, rerunning the block until
//	                                            it matches (30 s)
//
// In a run: a line starting ./bin/replicad is a daemon "in its own terminal"
// (started in the background, waited for until it says it listens, killed at
// the end; "& NAME=$!" after it exports NAME=its pid); make lines are skipped
// (the binaries are built already); every other line runs in bash -e -o
// pipefail; exports and plain assignments carry over to the path's next
// blocks; 127.0.0.1:9xxx
// addresses get free ports.

// docsRun is one path's processes and shell state.
type docsRun struct {
	t       *testing.T
	dir     string
	ports   map[string]string
	exports []string
	env     []string
	daemons int
}

var (
	docsAddr     = regexp.MustCompile(`127\.0\.0\.1:(9\d\d\d)`)
	docsPidVar   = regexp.MustCompile(`&\s*([A-Za-z_][A-Za-z0-9_]*)=\$!\s*$`)
	docsNoDaemon = regexp.MustCompile(`(^|\s)(--version|--help|version|-h)(\s|$)`)
	docsAssign   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=\S`)
)

func (r *docsRun) rewrite(line string) string {
	return docsAddr.ReplaceAllStringFunc(line, func(a string) string {
		if p, ok := r.ports[a]; ok {
			return p
		}
		r.ports[a] = freeAddr(r.t)
		return r.ports[a]
	})
}

// daemon starts line in the background and waits until it listens.
func (r *docsRun) daemon(line string) {
	r.t.Helper()
	pidVar := ""
	if m := docsPidVar.FindStringSubmatch(line); m != nil {
		pidVar = m[1]
		line = line[:len(line)-len(m[0])]
	}
	line = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), "&"))
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
	if pidVar != "" {
		r.env = append(r.env, fmt.Sprintf("%s=%d", pidVar, cmd.Process.Pid))
	}
	testutil.Eventually(r.t, 30*time.Second, func() error {
		b, _ := os.ReadFile(logPath)
		if !strings.Contains(string(b), "listening on") {
			return fmt.Errorf("%q has not said it listens yet:\n%s", line, b)
		}
		return nil
	})
}

// lastSucceeded is the exit status of a "fails" block whose last command
// succeeded (no command exits with it).
const lastSucceeded = "97"

// script runs lines in bash, checks its exit status and returns its output.
func (r *docsRun) script(b *docs.Block, lines []string) string {
	r.t.Helper()
	run := lines
	if b.Fails() {
		// Only the last command is to fail: the ones before it must
		// succeed, or a typo above it would pass for the failure shown.
		n := len(lines)
		run = append(append([]string{}, lines[:n-1]...), "if ( "+lines[n-1]+" ); then exit "+lastSucceeded+"; fi")
	}
	body := strings.Join(append(append([]string{}, r.exports...), run...), "\n")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", body)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), r.env...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case b.Fails() && errors.As(err, &exit) && strconv.Itoa(exit.ExitCode()) == lastSucceeded:
		r.t.Fatalf("%s: a block marked to fail succeeded:\n%s\n--- output:\n%s", b.Where(), body, out)
	case err != nil:
		r.t.Fatalf("%s: %v running\n%s\n--- output:\n%s", b.Where(), err, body, out)
	}
	return string(out)
}

// block runs one shell block in order: its commands in bash (up to each
// daemon, so a daemon starts after the commands above it), its daemons in the
// background; then it checks the output the page shows for it.
func (r *docsRun) block(b *docs.Block) {
	r.t.Helper()
	if _, notRun := b.NotRun(); notRun {
		return
	}
	var all, pending []string
	var out strings.Builder
	flush := func(last bool) {
		if len(pending) > 0 {
			sb := *b
			sb.Marker = ""
			if last {
				sb.Marker = b.Marker // "fails" is about the block's last command
			}
			out.WriteString(r.script(&sb, pending))
			// What a reader's shell keeps for what follows: exports, and
			// plain assignments (LIVE="...") whose value runs nothing.
			for _, l := range pending {
				if t := strings.TrimSpace(l); strings.HasPrefix(t, "export ") || docsAssign.MatchString(t) && !strings.Contains(t, "$(") {
					r.exports = append(r.exports, l)
				}
			}
			all = append(all, pending...)
			pending = nil
		}
	}
	for _, raw := range b.Lines {
		line := r.rewrite(raw)
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
		case strings.HasPrefix(trimmed, "make "):
		case strings.HasPrefix(trimmed, "./bin/replicad ") && !docsNoDaemon.MatchString(trimmed):
			flush(false)
			r.daemon(trimmed)
		default:
			pending = append(pending, line)
		}
	}
	last := pending
	if b.Fails() && len(last) == 0 {
		r.t.Fatalf("%s: a block marked to fail ends with a daemon, not a command that fails", b.Where())
	}
	flush(true)
	if b.Output != nil {
		if len(all) == 0 {
			r.t.Fatalf("%s: an output block for a block that runs no command", b.Where())
		}
		want := make([]string, len(b.Output.Lines))
		for i, l := range b.Output.Lines {
			want[i] = r.rewrite(l)
		}
		got := out.String()
		err := docs.MatchOutput(want, got)
		// Only the commands after the block's last daemon are rerun.
		for deadline := time.Now().Add(30 * time.Second); err != nil && b.Output.Eventually() && len(last) > 0 && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
			got = r.script(b, last)
			err = docs.MatchOutput(want, got)
		}
		if err != nil {
			r.t.Fatalf("%s: the output the page shows is stale: %v\n--- the page shows:\n%s\n--- the output:\n%s",
				b.Where(), err, strings.Join(b.Output.Lines, "\n"), got)
		}
	}
	r.t.Logf("ran %s: %d commands", b.Where(), len(all))
}

func TestDocsRunAsWritten(t *testing.T) {
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
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := docs.Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range docs.Paths {
		t.Run(path.Name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			for name, src := range map[string]string{"replicad": bins.Replicad, "ctlclient": bins.Ctlclient, "grpcurl": grpcurl} {
				if err := os.Symlink(src, filepath.Join(dir, "bin", name)); err != nil {
					t.Fatal(err)
				}
			}
			// The pages name repository files (deploy/config/...) from its root.
			for _, name := range []string{"deploy", "scripts"} {
				if err := os.Symlink(filepath.Join(root, name), filepath.Join(dir, name)); err != nil {
					t.Fatal(err)
				}
			}
			r := &docsRun{t: t, dir: dir, ports: map[string]string{}}
			blocks := 0
			for _, s := range path.Sections {
				page, anchor, _ := strings.Cut(s, "#")
				p, ok := pages[page]
				if !ok {
					t.Fatalf("path %s: no page %s", path.Name, page)
				}
				for _, b := range p.Blocks {
					if b.IsShell() && b.Anchor == anchor {
						r.block(b)
						blocks++
					}
				}
			}
			if blocks == 0 {
				t.Fatalf("path %s: no shell blocks in %v", path.Name, path.Sections)
			}
		})
	}
}
