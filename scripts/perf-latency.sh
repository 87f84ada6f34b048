#!/usr/bin/env bash
# perf-latency.sh: one synchronous acks=all producer (one record per request)
# against 3 replicad processes on loopback, and an A/B of two builds.
#
# Usage: scripts/perf-latency.sh [BIN_A [BIN_B]]
# Each BIN holds replicad and ctlclient (default: bin/). With two, the builds
# run alternating round by round (A, B, A, B, ...), each round on fresh
# brokers, and the script prints each run, the medians, and B's ratio to A:
# on a shared, noisy machine only alternating runs compare.
#
# Each run: 3 `replicad --log-flush FLUSH` brokers (partition perf-0, leader 1,
# ISR 1,2,3, set with ctlclient leader-and-isr), then
#   ctlclient perf produce --topic perf --records RECORDS --record-size RECORD_SIZE
#     --batch BATCH --acks all --concurrency CONCURRENCY
# The defaults are docs/performance.md's "replication latency" row; the batched
# throughput check is BATCH=100 CONCURRENCY=4 RECORDS=200000.
#
# STREAM_A, STREAM_B: --stream=VALUE for A's and B's ctlclient (true: one
# ProduceStream per broker, false: a unary Produce per request; unset: the
# ctlclient's default, and no flag for one that predates it). An A/B of the
# two ways with one build: STREAM_A=false STREAM_B=true perf-latency.sh bin bin
#
# Environment: ROUNDS (3), FLUSH ("os every-batch"), RECORDS (5000),
# RECORD_SIZE (1024), BATCH (1), CONCURRENCY (1), PORT_BASE (29191: brokers on
# PORT_BASE..+2), KEEP_DIR (a directory to keep each run's perf JSON in).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${1:-$ROOT/bin}
B=${2:-}
ROUNDS=${ROUNDS:-3}
FLUSH=${FLUSH:-os every-batch}
RECORDS=${RECORDS:-5000}
RECORD_SIZE=${RECORD_SIZE:-1024}
BATCH=${BATCH:-1}
CONCURRENCY=${CONCURRENCY:-1}
PORT_BASE=${PORT_BASE:-29191}

for d in "$A" ${B:+"$B"}; do
	for b in replicad ctlclient; do
		[[ -x $d/$b ]] || { echo "perf-latency: $d/$b missing (make build, or go build -o DIR/ ./cmd/replicad ./cmd/ctlclient)" >&2; exit 2; }
	done
done

. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/replicad-perf-latency.XXXXXX")
broker_pids=()
cleanup() {
	stop_brokers
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

addr() { echo "127.0.0.1:$((PORT_BASE + $1 - 1))"; }
live=(--live-broker "1=$(addr 1)" --live-broker "2=$(addr 2)" --live-broker "3=$(addr 3)")

# run BIN FLUSH TAG [STREAM]: fresh brokers of BIN, one perf run; writes
# "msg/s p50 p99" to $work/result.
run() {
	local bin=$1 flush=$2 tag=$3 dir=$work/$3 stream=()
	[[ -n ${4:-} ]] && stream=(--stream="$4")
	mkdir -p "$dir"
	for id in 1 2 3; do
		"$bin/replicad" --id "$id" --listen "$(addr "$id")" --log-dirs "$dir/b$id" \
			--log-flush "$flush" >"$dir/b$id.log" 2>&1 &
		broker_pids+=($!)
	done
	for id in 1 2 3; do wait_for "$dir/b$id.log" "replicad listening on"; done
	for id in 1 2 3; do
		"$bin/ctlclient" --broker "$(addr "$id")" leader-and-isr --controller-id 0 --controller-epoch 1 \
			--topic perf --partition 0 --leader 1 --leader-epoch 1 --replicas 1,2,3 --new "${live[@]}" >/dev/null
	done
	"$bin/ctlclient" --broker "$(addr 1)" -o json perf produce --topic perf \
		--records "$RECORDS" --record-size "$RECORD_SIZE" --batch "$BATCH" --acks all \
		--concurrency "$CONCURRENCY" "${stream[@]}" >"$dir/perf.json" 2>"$dir/perf.err"
	stop_brokers
	[[ -n ${KEEP_DIR:-} ]] && cp "$dir/perf.json" "$KEEP_DIR/$tag.json"
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
if r.get("failed"):
    sys.exit("perf-latency: %d records failed" % r["failed"])
print("%.0f %.3f %.3f" % (r["recordsPerSec"], r["latencyP50Ms"], r["latencyP99Ms"]))' "$dir/perf.json" >"$work/result"
	rm -rf "$dir"
}

builds=(A)
[[ -n $B ]] && builds+=(B)
declare -A bindir=([A]=$A [B]=$B)
declare -A streamof=([A]=${STREAM_A:-} [B]=${STREAM_B:-})
declare -A results
echo "acks=all, 3 brokers, $RECORDS x $RECORD_SIZE B records, batches of $BATCH, $CONCURRENCY producer(s); A=$A${STREAM_A:+ --stream=$STREAM_A}${B:+ B=$B}${STREAM_B:+ --stream=$STREAM_B}"
for round in $(seq "$ROUNDS"); do
	for flush in $FLUSH; do
		for b in "${builds[@]}"; do
			run "${bindir[$b]}" "$flush" "$b-$flush-$round" "${streamof[$b]}"
			r=$(<"$work/result")
			results[$b-$flush]+="$r;"
			read -r mps p50 p99 <<<"$r"
			printf '  round %d %-11s %s %8s msg/s  p50 %s ms  p99 %s ms\n' "$round" "$flush" "$b" "$mps" "$p50" "$p99"
		done
	done
done
for flush in $FLUSH; do
	python3 - "$flush" "${results[A-$flush]}" "${results[B-$flush]:-}" <<'EOF'
import statistics, sys
flush, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
def parse(s):
    rows = [list(map(float, x.split())) for x in s.split(";") if x.strip()]
    return [list(col) for col in zip(*rows)]
def fmt(cols):
    return "  ".join(f"{name} {statistics.median(c):g} ({min(c):g}-{max(c):g})" for name, c in zip(("msg/s", "p50", "p99"), cols))
A = parse(a)
print(f"median {flush:<11} A  {fmt(A)}")
if b:
    B = parse(b)
    print(f"median {flush:<11} B  {fmt(B)}")
    ma, mb = [statistics.median(c) for c in A], [statistics.median(c) for c in B]
    print(f"ratio  {flush:<11} B/A  msg/s {mb[0]/ma[0]:.3f}x  p50 {mb[1]/ma[1]:.3f}x  p99 {mb[2]/ma[2]:.3f}x")
EOF
done
