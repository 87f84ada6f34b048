package docs

// Path is a route a reader follows: the shell blocks of its sections, in this
// order, run against fresh processes (TestDocsRunAsWritten). A section is
// "page#anchor"; its blocks are those whose nearest heading it is (not its
// subsections').
type Path struct {
	Name     string
	Sections []string
}

// Paths are every path the docs test runs. A shell block in none of them must
// be marked <!-- docs-test: not run: REASON -->.
var Paths = []Path{
	{"tour", []string{"README.md#a-five-minute-tour"}},
	{"walkthrough", []string{
		"docs/getting-started.md#one-broker-by-hand",
		"docs/getting-started.md#the-same-with-grpcurl",
	}},
	{"three-brokers", []string{
		"docs/getting-started.md#three-brokers-replication-a-leader-change-by-hand-moving-a-replica",
	}},
	{"cluster", []string{
		"docs/getting-started.md#a-cluster-with-a-controller",
		"docs/getting-started.md#exactly-once-per-partition-idempotent-produce",
		"docs/getting-started.md#finding-leaders-without-the-controller",
	}},
	{"cli-reference", []string{
		"docs/reference/cli.md#a-cluster-to-try-these-on",
		"docs/reference/cli.md#when-a-command-fails",
		"docs/reference/cli.md#adding-partitions-to-a-topic",
		"docs/reference/cli.md#deleting-records",
		"docs/reference/cli.md#topic-configs",
		"docs/reference/cli.md#reassignment-plans-and-the-throttle",
	}},
	{"retention", []string{"docs/reference/cli.md#see-when-it-runs-run-it-now"}},
	{"versions", []string{"docs/operations.md#versions"}},
	{"controller-binary", []string{"docs/operations.md#the-controller-from-the-server-binary"}},
	{"security", []string{"docs/security.md#transport-security", "docs/security.md#acls",
		"docs/security.md#a-second-identity-without-openssl"}},
	{"reproducing-a-figure", []string{"docs/performance.md#reproducing-a-figure"}},
}
