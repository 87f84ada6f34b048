package layering

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// A rule says what the packages under From may not import (Deny) or may
// only import of the project (OnlyProject). Patterns are project-relative
// ("core", "controller/...") or, for other modules and the standard
// library, full import paths ("net", "google.golang.org/grpc/..."); "x/..."
// matches x and everything below it.
//
// Deny is checked against what a package reaches through the project's own
// packages, not only its direct imports: core importing an internal library
// that imports gRPC is core importing gRPC. OnlyProject is checked against
// direct imports.
type rule struct {
	From        []string
	Deny        []string
	OnlyProject []string
	Why         string
}

var rules = []rule{
	{
		From: []string{"core/..."},
		Deny: []string{
			"service", "fetcher", "protoconv", "brokersession", "alterpartition", "producerid", "controllerchannel",
			"controller/...", "client/...", "server/...", "cmd/...", "tests/...", "gen/...",
			"google.golang.org/grpc/...", "google.golang.org/protobuf/...", "net", "net/http/...", "crypto/tls",
		},
		Why: "core is the replica state machine: it takes a clock, a file system and a logger, " +
			"and knows nothing of gRPC, protobuf, the network or the layers built on it",
	},
	{
		From:        []string{"protoconv"},
		OnlyProject: []string{"core/...", "gen/..."},
		Why:         "protoconv converts between protobuf and core's types, and nothing else",
	},
	{
		From: []string{"service", "fetcher", "brokersession", "alterpartition", "producerid", "controllerchannel"},
		Deny: []string{"controller/...", "client/...", "server/...", "cmd/...", "tests/..."},
		Why: "the broker's network layer talks to the controller through gRPC only, " +
			"and is assembled by server/, never the other way round",
	},
	{
		From: []string{"controller/..."},
		Deny: []string{
			"core", "core/log/...", "core/logmgr/...", "service", "fetcher", "brokersession", "alterpartition",
			"producerid", "client/...", "server/...", "cmd/...", "tests/...",
		},
		Why: "the controller decides from its store; it shares core's small value packages " +
			"(tp, clock, topicconfig) but not the broker's replica manager, logs or network layer",
	},
	{
		From: []string{"client/..."},
		Deny: []string{
			"core", "core/log/...", "core/logmgr/...", "service", "fetcher", "brokersession", "alterpartition",
			"producerid", "controller/...", "server/...", "cmd/...", "tests/...",
		},
		Why: "the client library speaks the gRPC contract; it shares only core's value packages (record)",
	},
	{
		From:        []string{"internal/..."},
		OnlyProject: []string{"internal/...", "gen/..."},
		Why:         "internal/ holds leaf libraries: anything may use them, so they may use nothing above them",
	},
	{
		From:        []string{"gen/..."},
		OnlyProject: []string{"gen/..."},
		Why:         "generated code depends on the contract alone",
	},
	{
		From: []string{"server/..."},
		Deny: []string{"cmd/...", "tests/..."},
		Why:  "server/ assembles processes for cmd/ and the harnesses, which sit above it",
	},
}

// Rules on who may import a package at all, for every package, external
// test packages included.
var importedOnlyBy = []struct {
	Target, By []string
	Why        string
}{
	{[]string{"cmd/..."}, []string{"cmd/..."}, "commands are the top of the tree"},
	{[]string{"tests/..."}, []string{"tests/..."}, "harnesses and end-to-end tests are not libraries"},
	{[]string{"server/..."}, []string{"cmd/...", "tests/...", "server/..."}, "server/ is the process assembly, used by commands and harnesses"},
}

// exceptions are packages allowed to break the rules today, each with the
// reason and what removes it. One whose directory is gone fails the test:
// delete its entry.
var exceptions = map[string]string{}

// External test packages (package x_test) are clients of the package they
// test, outside its layer, and compile into no binary: core's end-to-end
// tests wire a real fetcher to a real replica manager that way. They are
// held only to importedOnlyBy. In-package test files are part of the
// package and are held to its rules (most breaches would be import cycles
// anyway).

type pkg struct {
	dir      string            // project-relative, slash-separated
	imports  map[string]string // import path -> a file importing it (non-test and in-package test files)
	shipped  map[string]bool   // imports of non-test files: what importers reach through it
	xImports map[string]string // imports of external test files
}

func TestLayering(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs := loadPackages(t, root, module)

	for dir, why := range exceptions {
		if _, ok := pkgs[dir]; !ok {
			t.Errorf("exception for %s (%s): no such package any more, delete the exception", dir, why)
		}
	}
	for _, dir := range sortedKeys(pkgs) {
		p := pkgs[dir]
		if _, ok := exceptions[dir]; ok {
			continue
		}
		for _, r := range rules {
			if !matchAny(r.From, dir) {
				continue
			}
			for imp, file := range p.imports {
				rel, own := projectPath(module, imp)
				if !own || len(r.OnlyProject) == 0 || matchAny(r.OnlyProject, rel) {
					continue
				}
				t.Errorf("%s imports %s: %s may import only %s of the project (%s)", file, rel, dir, strings.Join(r.OnlyProject, ", "), r.Why)
			}
			if len(r.Deny) > 0 {
				if v := reachDenied(module, pkgs, p, r.Deny); len(v) > 0 {
					t.Errorf("%s may not import %s (%s):\n\t%s", dir, strings.Join(r.Deny, ", "), r.Why, strings.Join(v, "\n\t"))
				}
			}
		}
		all := map[string]string{}
		for imp, f := range p.imports {
			all[imp] = f
		}
		for imp, f := range p.xImports {
			all[imp] = f
		}
		for imp, file := range all {
			rel, own := projectPath(module, imp)
			if !own {
				continue
			}
			for _, o := range importedOnlyBy {
				if matchAny(o.Target, rel) && !matchAny(o.By, dir) {
					t.Errorf("%s imports %s: only %s may import %s (%s)", file, rel, strings.Join(o.By, ", "), strings.Join(o.Target, ", "), o.Why)
				}
			}
		}
	}
}

// reachDenied walks p's imports through the project's own packages (their
// non-test imports) and describes the denied imports reached: per direct
// import, the first one found and how many more.
func reachDenied(module string, pkgs map[string]*pkg, p *pkg, deny []string) []string {
	type step struct {
		dir  string
		path []string
	}
	var out []string
	for _, imp := range sortedKeys(p.imports) {
		rel, own := projectPath(module, imp)
		name := imp
		if own {
			name = rel
		}
		if matchAny(deny, name) {
			out = append(out, fmt.Sprintf("%s imports %s", p.imports[imp], name))
			continue
		}
		if !own {
			continue
		}
		// What this import brings in with it, breadth first.
		first, more := "", 0
		seen := map[string]bool{p.dir: true, rel: true}
		queue := []step{{rel, []string{rel}}}
		for len(queue) > 0 {
			st := queue[0]
			queue = queue[1:]
			q, ok := pkgs[st.dir]
			if !ok {
				continue
			}
			for _, next := range sortedKeys(q.shipped) {
				nrel, nown := projectPath(module, next)
				nname := next
				if nown {
					nname = nrel
				}
				if matchAny(deny, nname) {
					if first == "" {
						first = fmt.Sprintf("%s imports %s, which reaches %s through %s", p.imports[imp], rel, nname, strings.Join(st.path, " -> "))
					} else {
						more++
					}
					continue
				}
				if nown && !seen[nrel] {
					seen[nrel] = true
					queue = append(queue, step{nrel, append(slices.Clone(st.path), nrel)})
				}
			}
		}
		if first != "" {
			if more > 0 {
				first += fmt.Sprintf(" (and %d more denied imports that way)", more)
			}
			out = append(out, first)
		}
	}
	return out
}

// moduleRoot finds the directory of the project's go.mod and its module path.
func moduleRoot(t *testing.T) (root, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for _, line := range strings.Split(string(data), "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return dir, strings.TrimSpace(rest)
				}
			}
			t.Fatalf("%s/go.mod names no module", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// packageDirs lists every directory of the module holding Go files:
// hidden and underscore directories, testdata, bin/ and nested modules
// are not part of it, as for the go command.
func packageDirs(t *testing.T, root string) map[string][]string {
	t.Helper()
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" ||
				name == "vendor" || name == "node_modules" || rel == "bin") {
				return filepath.SkipDir
			}
			if rel != "." {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if strings.HasSuffix(rel, ".go") {
			dir := pathDir(rel)
			dirs[dir] = append(dirs[dir], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

func pathDir(rel string) string {
	if i := strings.LastIndex(rel, "/"); i >= 0 {
		return rel[:i]
	}
	return "."
}

// loadPackages parses the imports of every Go file of the module
// (generated ones too: gen/ has a rule of its own).
func loadPackages(t *testing.T, root, module string) map[string]*pkg {
	t.Helper()
	fset := token.NewFileSet()
	pkgs := map[string]*pkg{}
	for dir, files := range packageDirs(t, root) {
		p := &pkg{dir: dir, imports: map[string]string{}, shipped: map[string]bool{}, xImports: map[string]string{}}
		for _, path := range files {
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
			if err != nil {
				t.Fatalf("parse %s: %v", path, err)
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			test := strings.HasSuffix(path, "_test.go")
			external := test && strings.HasSuffix(f.Name.Name, "_test")
			for _, is := range f.Imports {
				imp, err := strconv.Unquote(is.Path.Value)
				if err != nil {
					t.Fatalf("%s: import %s: %v", rel, is.Path.Value, err)
				}
				switch {
				case external:
					p.xImports[imp] = rel
				default:
					p.imports[imp] = rel
					if !test {
						p.shipped[imp] = true
					}
				}
			}
		}
		pkgs[dir] = p
	}
	return pkgs
}

// projectPath returns imp relative to the module, and whether it is in it.
func projectPath(module, imp string) (string, bool) {
	if imp == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(imp, module+"/")
	return rel, ok
}

func match(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	for _, p := range patterns {
		if match(p, path) {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestPackageMapMatchesTree checks docs/design.md's package map against the
// tree: every package directory has a row, and every row names a package
// directory that exists.
func TestPackageMapMatchesTree(t *testing.T) {
	root, _ := moduleRoot(t)
	listed, err := packageMap(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := packageDirs(t, root)
	for _, dir := range sortedKeys(dirs) {
		if !listed[dir] {
			t.Errorf("package %s is missing from the package map in docs/design.md", dir)
		}
	}
	for _, dir := range sortedKeys(listed) {
		if _, ok := dirs[dir]; !ok {
			t.Errorf("docs/design.md's package map lists %s, which is no package directory of the tree", dir)
		}
	}
}

// mapRow is a table row whose first cell starts with a `path`.
var mapRow = regexp.MustCompile("^\\|\\s*`([^`]+)`")

// packageMap reads the paths of the "## Package map" section's tables.
func packageMap(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	listed := map[string]bool{}
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = strings.TrimSpace(line) == "## Package map"
			continue
		}
		if !in {
			continue
		}
		if m := mapRow.FindStringSubmatch(line); m != nil {
			listed[strings.TrimSuffix(m[1], "/")] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(listed) == 0 {
		return nil, fmt.Errorf("%s: no package rows under \"## Package map\"", path)
	}
	return listed, nil
}

// TestKafkaTestTableNamesRealTests checks that docs/kafka-tests.md names
// only replicad tests and scenario files that exist, so that a renamed or
// deleted test cannot leave the table pointing nowhere.
func TestKafkaTestTableNamesRealTests(t *testing.T) {
	root, _ := moduleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "kafka-tests.md"))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]bool{}
	for _, files := range packageDirs(t, root) {
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range testFunc.FindAllStringSubmatch(string(data), -1) {
				tests[m[1]] = true
			}
		}
	}
	for _, m := range regexp.MustCompile("`(Test[A-Za-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		if !tests[m[1]] {
			t.Errorf("docs/kafka-tests.md names %s, which is no test of the tree", m[1])
		}
	}
	for _, m := range regexp.MustCompile("`([a-z0-9_]+\\.txt)`").FindAllStringSubmatch(string(doc), -1) {
		found := false
		for _, dir := range []string{"core", "fetcher"} {
			if _, err := os.Stat(filepath.Join(root, dir, "testdata", "scenarios", m[1])); err == nil {
				found = true
			}
		}
		if !found {
			t.Errorf("docs/kafka-tests.md names scenario %s, which is in neither core/ nor fetcher/testdata/scenarios", m[1])
		}
	}
}

var testFunc = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)
