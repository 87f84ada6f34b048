// Package docs reads the project's markdown pages (README.md and docs/**/*.md)
// and checks them: every relative link and #anchor resolves, every page under
// docs/ is reachable from README.md, every alert in deploy/monitoring links to
// its runbook, and every shell block is either run by the docs test
// (tests/integration, TestDocsRunAsWritten) or marked as not run here, with a
// reason. The checks here start no process: go test ./tests/docs/ takes a
// second.
//
// Conventions for writing pages (docs/development.md, "Writing docs", says the
// same for humans):
//
//   - A shell block is a fence whose info string is sh, bash or shell. The docs
//     test runs the shell blocks of the sections named in Paths (page#anchor),
//     in order, against fresh processes: a line starting ./bin/replicad (not
//     --version or --help) is a daemon "in its own terminal", started in the
//     background and waited for until it says it listens ("& NAME=$!" after it
//     exports NAME as its pid); make lines are skipped (the binaries are
//     built); every other line runs in bash -e -o pipefail and must exit 0;
//     exports and plain assignments (LIVE="...", not $(...)) carry over to
//     the next blocks of the path; 127.0.0.1:9xxx
//     addresses get free ports.
//   - A shell block no path runs must say why, on the line before its fence:
//     <!-- docs-test: not run: needs podman -->. Honest reasons: a container
//     runtime, systemd, Kubernetes, a second host, etcd, a long benchmark, a
//     tool make test does not build. A block in no path and without the
//     marker fails TestShellBlocksAreRunOrMarked, so a new page cannot slip
//     past the test.
//   - <!-- docs-test: fails --> before a block: it must exit non-zero.
//   - <!-- docs-test: output --> before a fence right after a shell block: that
//     fence is the block's expected output. Each non-blank line must match a
//     line of the block's output (stdout and stderr together), in order;
//     whitespace runs compare equal, "..." or "…" stands for any text within
//     a line, a line of only "..." for any lines, and <UPPER_CASE> for one
//     word (a PID, an id, a time). <!-- docs-test: output eventually --> reruns
//     the block until its output matches (within 30 s), for a state that
//     settles (an ISR that grows back). A fence right after a run shell block
//     without the marker fails the check: shown output is checked output.
//   - Links between pages are relative (docs/operations.md#runbook-fencedbrokers);
//     anchors follow GitHub's slugs (lower case, punctuation dropped, spaces to
//     dashes, -1, -2 for repeats).
package docs
