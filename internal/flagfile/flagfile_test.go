package flagfile

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type vals struct {
	listen  string
	id      int
	unclean bool
	timeout time.Duration
	dirs    string
	rules   []string
}

func newFS(v *vals) *flag.FlagSet {
	fs := flag.NewFlagSet("replicad", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&v.listen, "listen", "127.0.0.1:9091", "")
	fs.IntVar(&v.id, "id", 1, "")
	fs.BoolVar(&v.unclean, "unclean-leader-election", false, "")
	fs.DurationVar(&v.timeout, "session-timeout", 6*time.Second, "")
	fs.StringVar(&v.dirs, "log-dirs", "", "")
	fs.Func("tls-principal-rule", "", func(s string) error { v.rules = append(v.rules, s); return nil })
	fs.String("config", "", "")
	return fs
}

var opts = Options{Repeatable: []string{"tls-principal-rule"}, Refused: []string{"config"}}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "replicad.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyFileUnderTheCommandLine(t *testing.T) {
	path := writeFile(t, `# a broker
listen: 0.0.0.0:9091
id: 7
unclean-leader-election: true
session-timeout: 2s
log-dirs: [/data/a, /data/b]
tls-principal-rule:
  - CN=(.*)->spiffe://replicad/client/$1
  - DNS=(.*)->spiffe://replicad/client/$1
`)
	var v vals
	fs := newFS(&v)
	if err := fs.Parse([]string{"--id", "3", "--config", path}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(fs, path, opts); err != nil {
		t.Fatal(err)
	}
	if v.id != 3 {
		t.Errorf("id = %d: the command line's 3 must win over the file's 7", v.id)
	}
	if v.listen != "0.0.0.0:9091" || !v.unclean || v.timeout != 2*time.Second {
		t.Errorf("file values not applied: %+v", v)
	}
	if v.dirs != "/data/a,/data/b" {
		t.Errorf("log-dirs = %q, want the list joined with commas", v.dirs)
	}
	if len(v.rules) != 2 || !strings.HasPrefix(v.rules[1], "DNS=") {
		t.Errorf("repeatable flag got %q, want each item once", v.rules)
	}
}

// A repeatable flag given on the command line replaces the file's list
// rather than adding to it, as any other flag does.
func TestCommandLineReplacesARepeatableFlag(t *testing.T) {
	path := writeFile(t, "tls-principal-rule: [CN=(.*)->spiffe://replicad/client/$1]\n")
	var v vals
	fs := newFS(&v)
	if err := fs.Parse([]string{"--tls-principal-rule", "URI=(.*)->$1"}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(fs, path, opts); err != nil {
		t.Fatal(err)
	}
	if len(v.rules) != 1 || v.rules[0] != "URI=(.*)->$1" {
		t.Fatalf("rules = %q", v.rules)
	}
}

func TestApplyRefuses(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"listen: 1.2.3.4:1\nlisten-adress: x\n", `:2: unknown key "listen-adress"`},
		{"--listen: x\n", `:1: unknown key "--listen"`},
		{"config: other.yaml\n", `:1: unknown key "config"`},
		{"id: seven\n", `:1: id: invalid value "seven"`},
		{"unclean-leader-election: yes\n", `unclean-leader-election: invalid value "yes"`},
		{"session-timeout: 6\n", `session-timeout: invalid value "6"`},
		{"id:\n", "id: no value"},
		{"id: {a: 1}\n", "id: want a value or a list"},
		{"log-dirs: [[a]]\n", "log-dirs: a list holds plain values"},
		{"id: 1\nid: 2\n", "line 2: id given twice (first on line 1)"},
		{"- id\n", "want a mapping"},
		{"id: 1\n---\nid: 2\n", "one YAML document"},
		{"id: [1\n", "yaml"},
	} {
		var v vals
		fs := newFS(&v)
		_ = fs.Parse(nil)
		err := Apply(fs, writeFile(t, tc.body), opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--config ") {
			t.Errorf("%q: error %v, want one with %q", tc.body, err, tc.want)
		}
	}
	var v vals
	fs := newFS(&v)
	if err := Apply(fs, filepath.Join(t.TempDir(), "missing.yaml"), opts); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file: %v", err)
	}
}

func TestEmptyFileChangesNothing(t *testing.T) {
	var v vals
	fs := newFS(&v)
	_ = fs.Parse(nil)
	if err := Apply(fs, writeFile(t, "# nothing yet\n"), opts); err != nil {
		t.Fatal(err)
	}
	if v.listen != "127.0.0.1:9091" || v.id != 1 {
		t.Fatalf("defaults changed: %+v", v)
	}
}
