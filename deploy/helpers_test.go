package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// replicadBin builds cmd/replicad once for the package's tests.
func replicadBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "replicad-deploy-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "replicad")
		cmd := exec.Command("go", "build", "-o", builtBin, "./cmd/replicad")
		cmd.Dir = filepath.Join("..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/replicad: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9._-]+)`)

// daemonFlags are the flag names the real binary's --help lists: of the
// broker (no args) or of `replicad controller`.
func daemonFlags(t *testing.T, controller bool) map[string]bool {
	t.Helper()
	args := []string{"--help"}
	if controller {
		args = []string{"controller", "--help"}
	}
	out, err := exec.Command(replicadBin(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("replicad %v: %v\n%s", args, err, out)
	}
	names := map[string]bool{}
	for _, m := range flagLine.FindAllStringSubmatch(string(out), -1) {
		names[m[1]] = true
	}
	if len(names) < 10 {
		t.Fatalf("replicad %v lists %d flags:\n%s", args, len(names), out)
	}
	return names
}

// parseArgs reads a daemon's argument list (--flag value or --flag=value)
// into a map, failing on a flag the binary does not have, a flag given
// twice, or a stray argument. Boolean flags must use --flag=true|false.
func parseArgs(t *testing.T, where string, args []string, known map[string]bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Fatalf("%s: stray argument %q in %q", where, a, args)
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !known[name] {
			t.Fatalf("%s: replicad has no flag --%s", where, name)
		}
		if !hasVal {
			if i+1 >= len(args) {
				t.Fatalf("%s: --%s has no value", where, name)
			}
			i++
			val = args[i]
		}
		if _, dup := out[name]; dup {
			t.Fatalf("%s: --%s given twice", where, name)
		}
		out[name] = val
	}
	return out
}

// decodeStrict decodes every YAML document of data into a new T, refusing
// unknown fields.
func decodeStrict[T any](t *testing.T, name string, data []byte) []T {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var docs []T
	for {
		var v T
		err := dec.Decode(&v)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return docs
			}
			t.Fatalf("%s: document %d: %v", name, len(docs)+1, err)
		}
		docs = append(docs, v)
	}
}
