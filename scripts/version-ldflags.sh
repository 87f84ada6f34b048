#!/usr/bin/env bash
# Prints the -ldflags -X flags giving internal/version the version, commit,
# commit date and modified bit from git, for builds where Go's own stamping
# (runtime/debug build info) records none: a git worktree (cmd/go takes only
# a .git directory for a repository), -buildvcs=false. The build info wins
# when it has them. Prints nothing outside a git checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
commit=$(git rev-parse HEAD 2>/dev/null) || exit 0
date=$(TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
modified=false
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then modified=true; fi
# The version Go would stamp: the tag at HEAD, or a pseudo-version.
if ! version=$(git describe --tags --exact-match --match 'v*' 2>/dev/null); then
	version="v0.0.0-$(TZ=UTC git show -s --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)-${commit:0:12}"
fi
if [ "$modified" = true ]; then version+="+dirty"; fi
pkg=github.com/replicad/replicad/internal/version
echo "-X $pkg.linkVersion=$version -X $pkg.linkCommit=$commit -X $pkg.linkDate=$date -X $pkg.linkModified=$modified"
