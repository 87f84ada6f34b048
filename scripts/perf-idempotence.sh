#!/usr/bin/env bash
# perf-idempotence.sh: perf produce with idempotence on vs off, alternating,
# against 3 replicad processes and a controller on loopback (producer IDs
# come from the controller, so the brokers run with --controller).
#
# Usage: scripts/perf-idempotence.sh [BIN]   (BIN holds replicad and
# ctlclient; default bin/). Each round starts a fresh controller and 3
# `replicad --log-flush os` brokers, creates topic perf (PARTITIONS
# partitions, replication factor 3), then runs
#   ctlclient --bootstrap ... perf produce --topic perf --partitions PARTITIONS
#     --records RECORDS --record-size RECORD_SIZE --batch BATCH --acks all
#     --concurrency CONCURRENCY --idempotence=true|false
# in both orders on alternate rounds, and prints each run, the medians and
# on/off's ratio.
#
# Environment: ROUNDS (3), RECORDS (5000), RECORD_SIZE (1024), BATCH (1),
# CONCURRENCY (1), PARTITIONS (1), PORT_BASE (29491: the controller, then
# brokers on PORT_BASE+1..+3).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${1:-$ROOT/bin}
ROUNDS=${ROUNDS:-3}
RECORDS=${RECORDS:-5000}
RECORD_SIZE=${RECORD_SIZE:-1024}
BATCH=${BATCH:-1}
CONCURRENCY=${CONCURRENCY:-1}
PARTITIONS=${PARTITIONS:-1}
PORT_BASE=${PORT_BASE:-29491}

for b in replicad ctlclient; do
	[[ -x $BIN/$b ]] || { echo "perf-idempotence: $BIN/$b missing" >&2; exit 2; }
done
. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/replicad-perf-idem.XXXXXX")
broker_pids=()
cleanup() {
	stop_brokers
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

addr() { echo "127.0.0.1:$((PORT_BASE + $1))"; }
boot="$(addr 1),$(addr 2),$(addr 3)"

# run IDEM: one perf run on the current cluster; appends "msg/s p50 p99".
run() {
	"$BIN/ctlclient" --bootstrap "$boot" -o json perf produce --topic perf --partitions "$PARTITIONS" \
		--records "$RECORDS" --record-size "$RECORD_SIZE" --batch "$BATCH" --acks all \
		--concurrency "$CONCURRENCY" --idempotence="$1" >"$work/perf.json" 2>"$work/perf.err"
	if grep -q warning "$work/perf.err"; then
		echo "perf-idempotence: $(cat "$work/perf.err")" >&2
		exit 1
	fi
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("failed"):
    sys.exit("perf-idempotence: %d records failed" % r["failed"])
print("%.0f %.3f %.3f" % (r["recordsPerSec"], r["latencyP50Ms"], r["latencyP99Ms"]))' "$work/perf.json"
}

declare -A results
echo "acks=all, 3 brokers + controller, $RECORDS x $RECORD_SIZE B records, batches of $BATCH, $CONCURRENCY producer(s), $PARTITIONS partition(s)"
for round in $(seq "$ROUNDS"); do
	dir=$work/r$round
	mkdir -p "$dir"
	"$BIN/ctlclient" controller run --listen "$(addr 0)" --store "$dir/ctl" >"$dir/ctl.log" 2>&1 &
	broker_pids+=($!)
	wait_for "$dir/ctl.log" "listening"
	for id in 1 2 3; do
		"$BIN/replicad" --id "$id" --listen "$(addr "$id")" --log-dirs "$dir/b$id" --controller "$(addr 0)" \
			--log-flush os >"$dir/b$id.log" 2>&1 &
		broker_pids+=($!)
	done
	for id in 1 2 3; do wait_for "$dir/b$id.log" "replicad listening on"; done
	"$BIN/ctlclient" --controller "$(addr 0)" --timeout 30s create-topic --topic perf --partitions "$PARTITIONS" \
		--replication-factor 3 >/dev/null
	order=(true false)
	((round % 2 == 0)) && order=(false true)
	for idem in "${order[@]}"; do
		r=$(run "$idem")
		results[$idem]+="$r;"
		read -r mps p50 p99 <<<"$r"
		printf '  round %d idempotence=%-5s %8s msg/s  p50 %s ms  p99 %s ms\n' "$round" "$idem" "$mps" "$p50" "$p99"
	done
	stop_brokers
	rm -rf "$dir"
done
python3 - "${results[true]}" "${results[false]}" <<'EOF2'
import statistics, sys
def parse(s):
    rows = [list(map(float, x.split())) for x in s.split(";") if x.strip()]
    return [list(col) for col in zip(*rows)]
def fmt(cols):
    return "  ".join(f"{n} {statistics.median(c):g} ({min(c):g}-{max(c):g})" for n, c in zip(("msg/s", "p50", "p99"), cols))
on, off = parse(sys.argv[1]), parse(sys.argv[2])
print(f"median idempotence on   {fmt(on)}")
print(f"median idempotence off  {fmt(off)}")
mon, moff = [statistics.median(c) for c in on], [statistics.median(c) for c in off]
print(f"ratio  on/off  msg/s {mon[0]/moff[0]:.3f}x  p50 {mon[1]/moff[1]:.3f}x  p99 {mon[2]/moff[2]:.3f}x")
EOF2
