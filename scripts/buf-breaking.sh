#!/usr/bin/env bash
# make breaking: the gRPC contract (proto/, working tree included) against a baseline commit, with
# buf's FILE rules (buf.yaml): a renumbered, removed or retyped field, a renamed message or RPC,
# fails; an added field, message or RPC passes. .ci/run runs it.
#
# The baseline is where this branch left main (git merge-base HEAD main), so the check sees
# exactly the changes the branch makes, and stays quiet about additions main gained since (against
# main's tip, a branch that merely lags would look as if it deleted them). main is the local
# branch, else origin/main: a `git clone` of a checkout has main only as origin/main. Where HEAD
# is main itself (or behind it: merge-base = HEAD), the baseline is HEAD's first parent, main as it
# was before the last commit or merge: the change that commit brought. BASELINE=<commit> overrides.
# Without main and without a parent (a one-commit shallow clone) there is nothing to compare:
# that fails rather than passing unchecked.
set -euo pipefail
cd "$(dirname "$0")/.."

commit() { git rev-parse -q --verify "$1^{commit}" 2>/dev/null; }
head=$(commit HEAD)
base=${BASELINE:-}
how="BASELINE"
if [ -z "$base" ]; then
	for ref in main origin/main; do
		if main=$(commit "$ref"); then
			base=$(git merge-base "$head" "$main" || true)
			how="the merge-base of HEAD and $ref"
			break
		fi
	done
fi
if [ -z "$base" ] || [ "$base" = "$head" ]; then
	if ! base=$(commit "HEAD^1"); then
		echo "make breaking: no baseline: no main or origin/main to branch from, and HEAD has no parent" >&2
		echo "(a shallow clone? fetch more history, or give BASELINE=<commit>)" >&2
		exit 1
	fi
	how="HEAD's first parent (HEAD is on main)"
fi
# The common dir holds every ref and object, also from a linked worktree (whose .git is a file).
repo=$(git rev-parse --path-format=absolute --git-common-dir)
echo "buf breaking: proto/ against $(git log -1 --format='%h %s' "$base") ($how)"
exec "${BUF:-bin/buf}" breaking --against "$repo#format=git,ref=$base"
