package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// The monitoring files (deploy/monitoring), checked by the real Prometheus
// tools: bin/promtool and bin/prometheus (make prometheus; make test builds
// them and sets REPLICAD_PROMTOOL_BIN and REPLICAD_PROMETHEUS_BIN, so that
// a missing binary fails there instead of skipping).

const (
	rulesFile     = "deploy/monitoring/replicad-rules.yml"
	rulesTestFile = "deploy/monitoring/rules_test.yml"
	dashboardFile = "deploy/monitoring/replicad-dashboard.json"
	promConfig    = "deploy/monitoring/prometheus.yml"
)

// promtool runs bin/promtool with args (and stdin, when not empty) and
// returns its combined output and exit code.
func promtool(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(testutil.PromtoolBin(t), args...)
	cmd.Dir = testutil.RepoFile(t, ".")
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), testutil.ExitCode(err)
}

// dashboardPanel is what the test reads of a Grafana panel.
type dashboardPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

// dashboardQueries are every PromQL query of the dashboard, by panel title,
// with Grafana's variables replaced by what Grafana sends (all brokers, all
// topics, a one-minute rate interval), and the rows' titles.
func dashboardQueries(t *testing.T) (queries map[string][]string, rows []string, variableQueries []string) {
	t.Helper()
	raw, err := os.ReadFile(testutil.RepoFile(t, dashboardFile))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels     []dashboardPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Type  string `json:"type"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	expand := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h",
		`"$instance"`, `".*"`, `"$topic"`, `".*"`)
	queries = map[string][]string{}
	for _, p := range d.Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.Contains(expand.Replace(tg.Expr), "$") {
				t.Errorf("panel %q: a variable the test does not know in %q", p.Title, tg.Expr)
			}
			queries[p.Title] = append(queries[p.Title], expand.Replace(tg.Expr))
		}
	}
	// label_values(SELECTOR, LABEL) is Grafana's; its selector is PromQL.
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)["query"].(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, q)
			continue
		}
		variableQueries = append(variableQueries, m[1])
	}
	return queries, rows, variableQueries
}

// TestMonitoringFilesPassPromtool: promtool accepts the rules, the scrape
// config and the rules' unit tests (which evaluate every alert on synthetic
// series); and every query of the dashboard parses with Prometheus's own
// PromQL parser: they go to promtool as the expressions of recording
// rules, which it parses (promql/parser) and checks. The dashboard has the
// four rows an operator looks for.
func TestMonitoringFilesPassPromtool(t *testing.T) {
	for _, args := range [][]string{
		{"check", "rules", rulesFile},
		{"check", "config", promConfig},
		{"test", "rules", rulesTestFile},
	} {
		if out, code := promtool(t, "", args...); code != 0 || !strings.Contains(out, "SUCCESS") {
			t.Errorf("promtool %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}

	queries, rows, varQueries := dashboardQueries(t)
	for _, want := range []string{"Cluster overview", "Per broker", "Per topic", "Controller"} {
		if !slices.Contains(rows, want) {
			t.Errorf("dashboard rows %v lack %q", rows, want)
		}
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	n := 0
	titles := slices.Sorted(func(yield func(string) bool) {
		for k := range queries {
			if !yield(k) {
				return
			}
		}
	})
	for _, title := range titles {
		for _, q := range queries[title] {
			n++
			// A JSON string is a YAML string: the query goes in verbatim.
			quoted, _ := json.Marshal(q)
			fmt.Fprintf(&rules, "      # %s\n      - record: dashboard_query_%d\n        expr: %s\n", title, n, quoted)
		}
	}
	for _, q := range varQueries {
		n++
		quoted, _ := json.Marshal(q)
		fmt.Fprintf(&rules, "      - record: dashboard_variable_%d\n        expr: %s\n", n, quoted)
	}
	if n < 40 {
		t.Fatalf("only %d dashboard queries found", n)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := promtool(t, "", "check", "rules", path)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", n)) {
		t.Errorf("dashboard queries do not all parse (exit %d):\n%s\n%s", code, out, rules.String())
	}

	// The check can fail: a broken query is refused.
	bad := filepath.Join(t.TempDir(), "bad.yml")
	if err := os.WriteFile(bad, []byte("groups:\n  - name: x\n    rules:\n      - record: x\n        expr: 'sum(rate(x[1m])'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, code := promtool(t, "", "check", "rules", bad); code == 0 {
		t.Errorf("promtool accepted an unbalanced query:\n%s", out)
	}
}

// promQuery is an answer of Prometheus's HTTP API.
type promQuery struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
		} `json:"result"`
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	} `json:"data"`
}

func promGet(base, path string, params url.Values) (promQuery, error) {
	var q promQuery
	client := http.Client{Timeout: 5 * time.Second}
	u := base + path
	if params != nil {
		u += "?" + params.Encode()
	}
	resp, err := client.Get(u)
	if err != nil {
		return q, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return q, err
	}
	if err := json.Unmarshal(body, &q); err != nil {
		return q, fmt.Errorf("GET %s: %v: %s", u, err, body)
	}
	if q.Status != "success" {
		return q, fmt.Errorf("GET %s: %s: %s", u, q.ErrorType, q.Error)
	}
	return q, nil
}

// alertStates are the alerts Prometheus holds with their state, of name.
func alertStates(base, name string) (map[string]string, error) {
	q, err := promGet(base, "/api/v1/alerts", nil)
	if err != nil {
		return nil, err
	}
	states := map[string]string{}
	for _, a := range q.Data.Alerts {
		if a.Labels["alertname"] == name {
			states[a.Labels["instance"]] = a.State
		}
	}
	return states, nil
}

// testRules is the rules file with every `for:` cut to 2s, so that an
// alert fires within the test's seconds rather than minutes: the
// expressions, labels and annotations are the real ones.
func testRules(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(testutil.RepoFile(t, rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	forRe := regexp.MustCompile(`(?m)^(\s+)for: \S+$`)
	if len(forRe.FindAllString(string(raw), -1)) < 10 {
		t.Fatalf("%s: fewer `for:` lines than alerts", rulesFile)
	}
	return forRe.ReplaceAllString(string(raw), "${1}for: 2s")
}

// TestPrometheusAlertsOnBrokerDeath runs a real Prometheus (1 s scrape and
// evaluation) with the real rules against a live controller and 3 brokers:
// promtool's metrics lint passes on a live scrape of a broker and of the
// controller (but for SPEC's two _count names), every dashboard query runs
// without error, mostly with data; no alert fires on the healthy cluster;
// a SIGKILLed broker makes UnderReplicatedPartitions fire (and
// FencedBrokers), and they resolve once the broker is back in the ISR.
func TestPrometheusAlertsOnBrokerDeath(t *testing.T) {
	testutil.PromtoolBin(t) // skips early without the binaries
	c := newCtlClusterFrom(t, true, 2*time.Second, nil, nil, "--metrics-listen", "127.0.0.1:0", "--replica-lag-time-max", "1s")
	ctlURL := withControllerMetrics(t, c)
	brokerURLs := map[int32]string{}
	for _, id := range clusterIDs {
		b, _ := c.broker(id)
		brokerURLs[id] = metricsURL(t, b)
	}
	c.createTopic("alerted", 3, 3)
	for p := int32(0); p < 3; p++ {
		for _, id := range clusterIDs {
			c.waitInIsr("alerted", p, id, 30*time.Second)
		}
		testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("alerted", p, fmt.Sprintf("r%d", p)) })
	}

	// The naming lint of the real promtool on live scrapes.
	for name, u := range map[string]string{"controller": ctlURL, "broker 1": brokerURLs[1]} {
		_, text, err := scrapeMetrics(u)
		if err != nil {
			t.Fatal(err)
		}
		// No exception: every name follows Prometheus's rules (a gauge never
		// ends in _count; SPEC's replicad_leaders and replicad_partitions).
		if out, code := promtool(t, text, "check", "metrics"); code != 0 || strings.TrimSpace(out) != "" {
			t.Errorf("promtool check metrics on the %s's scrape (exit %d):\n%s", name, code, out)
		}
	}

	// Prometheus, scraping every process each second, with the rules.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "replicad-rules.yml"), []byte(testRules(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	target := func(u string) string { return strings.TrimSuffix(strings.TrimPrefix(u, "http://"), "/metrics") }
	var brokerTargets []string
	for _, id := range clusterIDs {
		brokerTargets = append(brokerTargets, fmt.Sprintf("%q", target(brokerURLs[id])))
	}
	prom := testutil.StartPrometheus(t, dir, fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [replicad-rules.yml]
scrape_configs:
  - job_name: replicad-controller
    static_configs: [{targets: [%q]}]
  - job_name: replicad-broker
    static_configs: [{targets: [%s]}]
`, target(ctlURL), strings.Join(brokerTargets, ", ")))

	testutil.Eventually(t, 30*time.Second, func() error {
		q, err := promGet(prom, "/api/v1/query", url.Values{"query": {`sum(up{job=~"replicad-.*"})`}})
		if err != nil {
			return err
		}
		up, err := promGet(prom, "/api/v1/query", url.Values{"query": {`count(up{job=~"replicad-.*"} == 1) == 4`}})
		if err != nil {
			return err
		}
		if len(up.Data.Result) != 1 {
			return fmt.Errorf("not all 4 targets up yet (%v)", q.Data.Result)
		}
		// Two scrapes at least, so that rate() has two samples.
		rated, err := promGet(prom, "/api/v1/query", url.Values{"query": {`count(count_over_time(replicad_controller_active[1m]) > 2)`}})
		if err != nil {
			return err
		}
		if len(rated.Data.Result) == 0 {
			return fmt.Errorf("fewer than 3 scrapes of the controller")
		}
		return nil
	})

	// Every dashboard query runs on the live data; nearly all answer series.
	queries, _, _ := dashboardQueries(t)
	var empty []string
	total := 0
	for title, qs := range queries {
		for _, q := range qs {
			total++
			ans, err := promGet(prom, "/api/v1/query", url.Values{"query": {q}})
			if err != nil {
				t.Errorf("dashboard panel %q: %v", title, err)
				continue
			}
			if len(ans.Data.Result) == 0 {
				empty = append(empty, fmt.Sprintf("%s: %s", title, q))
			}
		}
	}
	// Empty on a healthy, young cluster: the error-code panels (no error
	// happened), deriv over 1h with too few samples, throttled bytes.
	if len(empty) > 8 {
		t.Errorf("%d of %d dashboard queries answered no series on a live cluster:\n%s", len(empty), total, strings.Join(empty, "\n"))
	} else {
		t.Logf("%d of %d dashboard queries answered series; empty: %v", total-len(empty), total, empty)
	}

	states, err := alertStates(prom, "UnderReplicatedPartitions")
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 0 {
		t.Fatalf("UnderReplicatedPartitions on a healthy cluster: %v", states)
	}

	b3, _ := c.broker(3)
	b3.Signal(syscall.SIGKILL)
	testutil.Eventually(t, 60*time.Second, func() error {
		states, err := alertStates(prom, "UnderReplicatedPartitions")
		if err != nil {
			return err
		}
		firing := 0
		for inst, s := range states {
			if s == "firing" {
				firing++
			}
			if inst == target(brokerURLs[3]) {
				return fmt.Errorf("the dead broker %s has an alert of its own: %v", inst, states)
			}
		}
		if firing == 0 {
			return fmt.Errorf("UnderReplicatedPartitions not firing yet: %v", states)
		}
		fenced, err := alertStates(prom, "FencedBrokers")
		if err != nil {
			return err
		}
		if fenced[""] != "firing" {
			return fmt.Errorf("FencedBrokers not firing yet: %v", fenced)
		}
		return nil
	})

	// Back on its metrics address, so that Prometheus finds it again.
	c.args = slices.Clone(c.args)
	c.args[slices.Index(c.args, "--metrics-listen")+1] = target(brokerURLs[3])
	c.startBroker(3)
	for p := int32(0); p < 3; p++ {
		c.waitInIsr("alerted", p, 3, 60*time.Second)
	}
	testutil.Eventually(t, 60*time.Second, func() error {
		for _, name := range []string{"UnderReplicatedPartitions", "FencedBrokers"} {
			states, err := alertStates(prom, name)
			if err != nil {
				return err
			}
			if len(states) != 0 {
				return fmt.Errorf("%s still %v after broker 3 rejoined", name, states)
			}
		}
		up, err := promGet(prom, "/api/v1/query", url.Values{"query": {fmt.Sprintf(`up{instance=%q} == 1`, target(brokerURLs[3]))}})
		if err != nil {
			return err
		}
		if len(up.Data.Result) != 1 {
			return fmt.Errorf("broker 3 not scraped again yet")
		}
		return nil
	})
}
