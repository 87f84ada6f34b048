#!/usr/bin/env bash
# perf-throttle.sh: does a throttled reassignment slow the ISR's acks=all produces?
#
# Runs a controller (`ctlclient controller run`, embedded store) and 4
# `replicad --log-flush os` brokers on loopback. Topic perf (1 partition, ISR
# on brokers 1-3) takes the measured load; topic bulk (3 partitions on brokers
# 1-3, one led by each) holds BULK_MB of data to move. The plan, from
# `reassign --generate --topics bulk --brokers 2,3,4`, adds a replica of every
# bulk partition on broker 4 (and drops broker 1's). Then, alternating, ROUNDS
# times each on the same cluster:
#   idle       `ctlclient perf produce --acks all` to perf, nothing else running
#   throttled  the same while the plan runs under `reassign --execute
#              --throttle THROTTLE` (bytes/s per leader for the replicas
#              being added); afterwards `reassign --verify` must still say
#              "in progress" (else the move ended during the run, which is
#              reported), then `reassign --cancel` undoes it and broker 4
#              deletes its copies before the next round
# and prints each run's p50, p99 and average request latency, then each
# mode's median and its ratio to idle. Needs bin/replicad and bin/ctlclient
# (`make build`).
#
# Environment: RECORDS (50000), RECORD_SIZE (1024), BATCH (10), CONCURRENCY (1),
# BULK_MB (60), THROTTLE (1048576), ROUNDS (3), PORT_BASE (29291: the
# controller, brokers on PORT_BASE+1..+4), MODES ("idle throttled").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
RECORDS=${RECORDS:-50000}
RECORD_SIZE=${RECORD_SIZE:-1024}
BATCH=${BATCH:-10}
CONCURRENCY=${CONCURRENCY:-1}
BULK_MB=${BULK_MB:-60}
THROTTLE=${THROTTLE:-1048576}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-29291}
MODES=${MODES:-idle throttled}

for b in replicad ctlclient; do
	[[ -x $BIN/$b ]] || { echo "perf-throttle: $BIN/$b missing: run make build" >&2; exit 2; }
done

. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/replicad-perf-throttle.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ctl_addr=127.0.0.1:$PORT_BASE
addr() { echo "127.0.0.1:$((PORT_BASE + $1))"; }
ctl() { "$BIN/ctlclient" --controller "$ctl_addr" "$@"; }

"$BIN/ctlclient" controller run --listen "$ctl_addr" --store "$work/ctl" >"$work/ctl.log" 2>&1 &
pids+=($!)
wait_for "$work/ctl.log" "active controller"
start_broker() {
	"$BIN/replicad" --id "$1" --listen "$(addr "$1")" --log-dirs "$work/b$1" --controller "$ctl_addr" \
		--log-flush os >"$work/b$1.log" 2>&1 &
	pids+=($!)
	wait_for "$work/b$1.log" "registered"
}
for id in 1 2 3; do start_broker "$id"; done
ctl create-topic --topic perf --partitions 1 --replication-factor 3 >/dev/null
ctl create-topic --topic bulk --partitions 3 --replication-factor 3 >/dev/null
start_broker 4
bulk_records=$((BULK_MB * 1024 / 10))
ctl perf produce --topic bulk --partitions 3 --records "$bulk_records" --record-size 10240 --batch 50 \
	--acks 1 --concurrency 3 >/dev/null 2>&1
ctl -o json reassign --generate --topics bulk --brokers 2,3,4 >"$work/generate.json" 2>/dev/null
python3 -c '
import json, sys
print(json.dumps(json.load(open(sys.argv[1]))["proposed"]))' "$work/generate.json" >"$work/plan.json"

# in_flight counts the partitions with replicas being added or removed.
in_flight() {
	ctl -o json describe-cluster | python3 -c '
import json, sys
print(sum(1 for p in json.load(sys.stdin).get("partitions", []) if p.get("addingReplicas") or p.get("removingReplicas")))'
}

# broker4_bulk_bytes is what broker 4 holds of bulk.
broker4_bulk_bytes() { du -sb "$work"/b4/bulk-* 2>/dev/null | awk '{s += $1} END {print s + 0}'; }

run() {
	local mode=$1 round=$2
	case $mode in
	idle) ;;
	throttled) ctl reassign --execute --plan "$work/plan.json" --throttle "$THROTTLE" >/dev/null ;;
	*) echo "perf-throttle: unknown mode $mode" >&2; exit 2 ;;
	esac
	ctl -o json perf produce --topic perf --records "$RECORDS" --record-size "$RECORD_SIZE" --batch "$BATCH" \
		--acks all --concurrency "$CONCURRENCY" >"$work/perf.json" 2>"$work/perf.err"
	local note=""
	if [[ $mode == throttled ]]; then
		note=" (broker 4 copied $(( $(broker4_bulk_bytes) / 1024 / 1024 )) MB of $BULK_MB MB)"
		if ctl reassign --verify --plan "$work/plan.json" >/dev/null 2>&1; then
			note+=" WARNING: the move completed during the run"
		fi
		ctl reassign --cancel >/dev/null
		for _ in $(seq 300); do
			[[ $(in_flight) == 0 && $(broker4_bulk_bytes) == 0 ]] && break
			sleep 0.1
		done
	fi
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("%.2f %.2f %.2f" % (r["latencyP50Ms"], r["latencyP99Ms"], r["latencyAvgMs"]))' "$work/perf.json" >"$work/result"
	echo "$note" >"$work/note"
}

# A warm-up run, not counted: the first run of a fresh cluster is slower.
ctl perf produce --topic perf --records "$((RECORDS / 4 + 1))" --record-size "$RECORD_SIZE" --batch "$BATCH" \
	--acks all --concurrency "$CONCURRENCY" >/dev/null 2>&1

declare -A p50s p99s avgs
echo "acks=all to perf (ISR 1,2,3), $RECORDS x $RECORD_SIZE B records, batches of $BATCH, $CONCURRENCY producer(s);"
echo "throttled: 3 bulk partitions of $((BULK_MB / 3)) MB each getting a replica on broker 4 at $THROTTLE B/s per leader"
for round in $(seq "$ROUNDS"); do
	for mode in $MODES; do
		run "$mode" "$round"
		read -r p50 p99 avg <"$work/result"
		p50s[$mode]+="$p50 "
		p99s[$mode]+="$p99 "
		avgs[$mode]+="$avg "
		printf '  round %d %-9s p50 %s ms  p99 %s ms  avg %s ms%s\n' "$round" "$mode" "$p50" "$p99" "$avg" "$(<"$work/note")"
	done
done
python3 - $(for m in $MODES; do printf '%s=%s;%s;%s ' "$m" "${p50s[$m]// /,}" "${p99s[$m]// /,}" "${avgs[$m]// /,}"; done) <<'PY'
import statistics, sys
med = {}
for arg in sys.argv[1:]:
    mode, _, vals = arg.partition("=")
    med[mode] = [statistics.median([float(x) for x in part.split(",") if x]) for part in vals.split(";")]
base = med.get("idle")
for mode, (p50, p99, avg) in med.items():
    line = f"median {mode:<9} p50 {p50:.2f} ms  p99 {p99:.2f} ms  avg {avg:.2f} ms"
    if base and mode != "idle":
        line += "  (vs idle: p50 {:+.1f}%, p99 {:+.1f}%, avg {:+.1f}%)".format(
            (p50 / base[0] - 1) * 100, (p99 / base[1] - 1) * 100, (avg / base[2] - 1) * 100)
    print(line)
PY
