// Package version tells which build of replicad is running: the version,
// commit and build date that `replicad --version` and `ctlclient version`
// print. Everything comes from the build info the Go toolchain embeds
// (runtime/debug.ReadBuildInfo), so no release step has to stamp anything:
// a `go build` inside a git checkout records the commit (vcs.revision), its
// time (vcs.time), whether the tree had uncommitted changes (vcs.modified)
// and, since Go 1.24, a main module version derived from the nearest tag (a
// pseudo-version without one). Go records none of it in a git worktree,
// with -buildvcs=false or outside a checkout: make build then passes the
// same facts from git with -ldflags -X, and a plain go build there says
// "unknown".
package version
