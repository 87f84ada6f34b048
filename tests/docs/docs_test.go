package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func loadPages(t *testing.T) (string, map[string]*Page) {
	t.Helper()
	root, err := Root()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, pages
}

func TestLinksResolve(t *testing.T) {
	root, pages := loadPages(t)
	for _, e := range CheckLinks(root, pages, nil) {
		t.Error(e)
	}
}

func TestEveryPageIsReachableFromTheReadme(t *testing.T) {
	_, pages := loadPages(t)
	for _, e := range CheckReachable(pages) {
		t.Error(e)
	}
}

func TestShellBlocksAreRunOrMarked(t *testing.T) {
	_, pages := loadPages(t)
	r := CheckBlocks(pages, Paths)
	for _, e := range r.Errors {
		t.Error(e)
	}
	t.Logf("%d shell blocks run by a path; marked not run: %v", r.Ran, r.Marked)
}

// writePages makes a repository of pages in a temporary dir and parses it.
func writePages(t *testing.T, files map[string]string) (string, map[string]*Page) {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, pages
}

// The checks themselves: each rule fails a page that breaks it, so a new
// page cannot slip past them.
func TestChecksCatchWhatTheyAreFor(t *testing.T) {
	fence := "```"
	root, pages := writePages(t, map[string]string{
		"README.md": "# r\n\n[start](docs/a.md#run-me) [gone](docs/nope.md) [bad anchor](docs/a.md#nowhere)\n",
		"docs/a.md": "# A\n\n## Run me\n\n" + fence + "sh\necho hi\n" + fence + "\n" + fence + "\nhi\n" + fence + "\n\n" +
			"## Other\n\n" + fence + "sh\necho unmarked\n" + fence + "\n\n" +
			"<!-- docs-test: not run: -->\n" + fence + "sh\necho no reason\n" + fence + "\n\n" +
			"<!-- docs-test: not run: needs podman -->\n" + fence + "sh\npodman run x\n" + fence + "\n\n" +
			fence + "console\n$ echo transcript\n" + fence + "\n",
		"docs/orphan.md": "# Orphan\n",
	})
	want := func(errs []string, subs ...string) {
		t.Helper()
		for _, sub := range subs {
			found := false
			for _, e := range errs {
				found = found || strings.Contains(e, sub)
			}
			if !found {
				t.Errorf("no error containing %q in:\n%s", sub, strings.Join(errs, "\n"))
			}
		}
	}
	want(CheckLinks(root, pages, nil), "docs/nope.md does not exist", "no heading with anchor #nowhere")
	want(CheckReachable(pages), "docs/orphan.md is not reachable")
	r := CheckBlocks(pages, []Path{{"p", []string{"docs/a.md#run-me", "docs/a.md#missing"}}})
	want(r.Errors,
		"docs/a.md:5 (section \"Run me\"): the fence after this run shell block (line 8)", // unmarked output
		"docs/a.md:14 (section \"Other\"): a shell block no path runs",
		"docs/a.md:19 (section \"Other\"): marked not run without a reason",
		"a console transcript",
		"path p: docs/a.md has no section #missing")
	if r.Ran != 1 || r.Marked["needs podman"] != 1 {
		t.Errorf("ran %d, marked %v; want 1 and needs podman: 1", r.Ran, r.Marked)
	}
	if len(r.Errors) != 5 {
		t.Errorf("%d errors, want 5:\n%s", len(r.Errors), strings.Join(r.Errors, "\n"))
	}
}

func TestMatchOutput(t *testing.T) {
	got := "TOPIC   PARTITION  ROLE\norders  0          leader\nwrote the HW checkpoint of 1 partitions in 0.4ms\nproducer 4001 at epoch 0\n"
	for _, c := range []struct {
		want []string
		ok   bool
	}{
		{[]string{"TOPIC PARTITION ROLE", "orders 0 leader"}, true},
		{[]string{"orders 0 leader", "TOPIC PARTITION ROLE"}, false}, // order counts
		{[]string{"wrote the HW checkpoint of 1 partitions in ..."}, true},
		{[]string{"wrote the HW checkpoint of 1 partitions in …"}, true},
		{[]string{"producer <PID> at epoch 0"}, true},
		{[]string{"producer <PID> at epoch 1"}, false},
		{[]string{"", "...", "orders 0 leader"}, true},
		{[]string{"orders 0"}, false}, // a whole line, not a prefix
	} {
		if err := MatchOutput(c.want, got); (err == nil) != c.ok {
			t.Errorf("MatchOutput(%q): %v, want ok=%v", c.want, err, c.ok)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Run it, test it": "run-it-test-it",
		"`make chaos`: real processes, real faults, a checker":          "make-chaos-real-processes-real-faults-a-checker",
		"Scale: 30,000 logs per broker, 100,000 partitions per cluster": "scale-30000-logs-per-broker-100000-partitions-per-cluster",
		"Runbook: UnderReplicatedPartitions":                            "runbook-underreplicatedpartitions",
		"Three brokers: replication, a leader change by hand":           "three-brokers-replication-a-leader-change-by-hand",
		"The [client](x.md) library":                                    "the-client-library",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAlertsLinkTheirRunbooks: every alerting rule in deploy/monitoring carries
// a runbook_url annotation docs/operations.md#runbook-<alert, lower case>,
// relative to the repository root, and that section exists.
func TestAlertsLinkTheirRunbooks(t *testing.T) {
	root, pages := loadPages(t)
	files, err := filepath.Glob(filepath.Join(root, "deploy/monitoring/*rules*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.yml") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rules struct {
			Groups []struct {
				Rules []struct {
					Alert       string            `yaml:"alert"`
					Annotations map[string]string `yaml:"annotations"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(data, &rules); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Alert == "" {
					continue
				}
				alerts++
				want := "docs/operations.md#runbook-" + strings.ToLower(r.Alert)
				got := r.Annotations["runbook_url"]
				if got != want {
					t.Errorf("%s: alert %s: runbook_url %q, want %q", filepath.Base(f), r.Alert, got, want)
					continue
				}
				file, anchor := resolve("", got)
				if p, ok := pages[file]; !ok || !p.Anchors[anchor] {
					t.Errorf("%s: alert %s: %s has no section #%s", filepath.Base(f), r.Alert, file, anchor)
				}
			}
		}
	}
	if alerts == 0 {
		t.Fatal("no alerts found in deploy/monitoring")
	}
}
