#!/usr/bin/env bash
# perf-tracing.sh: what tracing costs an acks=all producer.
#
# Runs 3 `replicad --log-flush os` brokers on loopback (partition perf-0, leader 1,
# ISR 1,2,3), then `ctlclient perf produce --acks all` against them, in three
# configurations, alternating, ROUNDS times each on fresh brokers:
#   off        no exporter (spans are not recorded)
#   otlp       every process exports spans to a real Jaeger (control plane only,
#              the default: Produce and Fetch make no spans)
#   data-plane the same with --trace-data-plane on the brokers (a span for every
#              Produce and follower Fetch)
# and prints each run's MB/s and p99, then each configuration's median and its
# ratio to "off". Needs bin/replicad, bin/ctlclient and bin/jaeger: `make
# perf-tracing` builds them and runs this.
#
# Environment: RECORDS (200000), RECORD_SIZE (1024), BATCH (100), CONCURRENCY (4),
# ROUNDS (3), PORT_BASE (29091: brokers on PORT_BASE..+2, Jaeger on +10..+12),
# MODES ("off otlp data-plane").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/bin
RECORDS=${RECORDS:-200000}
RECORD_SIZE=${RECORD_SIZE:-1024}
BATCH=${BATCH:-100}
CONCURRENCY=${CONCURRENCY:-4}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-29091}
MODES=${MODES:-off otlp data-plane}

for b in replicad ctlclient jaeger; do
	[[ -x $BIN/$b ]] || { echo "perf-tracing: $BIN/$b missing: run make build jaeger-build" >&2; exit 2; }
done

. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/replicad-perf-tracing.XXXXXX")
jaeger_pid=""
broker_pids=()
cleanup() {
	stop_brokers
	[[ -n $jaeger_pid ]] && { kill -TERM "$jaeger_pid" 2>/dev/null || true; wait "$jaeger_pid" 2>/dev/null || true; }
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

otlp=127.0.0.1:$((PORT_BASE + 10))
JAEGER_OTLP_GRPC=$otlp JAEGER_QUERY_HTTP=127.0.0.1:$((PORT_BASE + 11)) \
	JAEGER_QUERY_GRPC=127.0.0.1:$((PORT_BASE + 12)) JAEGER_LOG_LEVEL=warn \
	"$BIN/jaeger" --config "$ROOT/tools/jaeger/config.yaml" >"$work/jaeger.log" 2>&1 &
jaeger_pid=$!
for _ in $(seq 300); do
	(exec 3<>/dev/tcp/127.0.0.1/$((PORT_BASE + 10))) 2>/dev/null && break
	sleep 0.1
done

addr() { echo "127.0.0.1:$((PORT_BASE + $1 - 1))"; }
live=(--live-broker "1=$(addr 1)" --live-broker "2=$(addr 2)" --live-broker "3=$(addr 3)")

# run MODE ROUND: fresh brokers in MODE, one perf run; writes "MB/s p99_ms" to
# $work/result. It runs in this shell (not in $(...)), so a failure leaves the
# brokers in broker_pids for the exit trap to stop.
run() {
	local mode=$1 round=$2 dir=$work/$1-$2 env=() flags=()
	case $mode in
	off) env=(OTEL_EXPORTER_OTLP_ENDPOINT= OTEL_EXPORTER_OTLP_TRACES_ENDPOINT= OTEL_SDK_DISABLED=) ;;
	otlp) env=(OTEL_EXPORTER_OTLP_ENDPOINT=http://$otlp OTEL_EXPORTER_OTLP_INSECURE=true OTEL_SDK_DISABLED=) ;;
	data-plane)
		env=(OTEL_EXPORTER_OTLP_ENDPOINT=http://$otlp OTEL_EXPORTER_OTLP_INSECURE=true OTEL_SDK_DISABLED=)
		flags=(--trace-data-plane)
		;;
	*) echo "perf-tracing: unknown mode $mode" >&2; exit 2 ;;
	esac
	mkdir -p "$dir"
	for id in 1 2 3; do
		env "${env[@]}" "$BIN/replicad" --id "$id" --listen "$(addr "$id")" --log-dirs "$dir/b$id" \
			--log-flush os "${flags[@]}" >"$dir/b$id.log" 2>&1 &
		broker_pids+=($!)
	done
	for id in 1 2 3; do wait_for "$dir/b$id.log" "replicad listening on"; done
	for id in 1 2 3; do
		"$BIN/ctlclient" --broker "$(addr "$id")" leader-and-isr --controller-id 0 --controller-epoch 1 \
			--topic perf --partition 0 --leader 1 --leader-epoch 1 --replicas 1,2,3 --new "${live[@]}" >/dev/null
	done
	env "${env[@]}" "$BIN/ctlclient" --broker "$(addr 1)" -o json perf produce --topic perf \
		--records "$RECORDS" --record-size "$RECORD_SIZE" --batch "$BATCH" --acks all \
		--concurrency "$CONCURRENCY" >"$dir/perf.json" 2>"$dir/perf.err"
	stop_brokers
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("%.1f %.2f" % (r["mbPerSec"], r["latencyP99Ms"]))' "$dir/perf.json" >"$work/result"
	rm -rf "$dir"
}

declare -A results
echo "acks=all, 3 brokers --log-flush os, $RECORDS x $RECORD_SIZE B records, batches of $BATCH, $CONCURRENCY producers"
for round in $(seq "$ROUNDS"); do
	for mode in $MODES; do
		run "$mode" "$round"
		r=$(<"$work/result")
		results[$mode]+="${r%% *} "
		printf '  round %d %-10s %s MB/s  p99 %s ms\n' "$round" "$mode" "${r%% *}" "${r##* }"
	done
done
# Proof the exporting runs exported: the operations Jaeger holds per service.
python3 - "http://127.0.0.1:$((PORT_BASE + 11))" <<'EOF'
import json, sys, urllib.request
base = sys.argv[1]
for svc in json.load(urllib.request.urlopen(base + "/api/services"))["data"] or []:
    ops = json.load(urllib.request.urlopen(base + "/api/services/" + svc + "/operations"))["data"] or []
    print(f"jaeger holds {svc}: {', '.join(sorted(ops))}")
EOF
python3 - "${results[off]:-}" $(for m in $MODES; do printf '%s=%s ' "$m" "${results[$m]// /,}"; done) <<'EOF'
import statistics, sys
base = [float(x) for x in sys.argv[1].split()] if sys.argv[1].strip() else []
b = statistics.median(base) if base else None
for arg in sys.argv[2:]:
    mode, _, vals = arg.partition("=")
    xs = [float(x) for x in vals.split(",") if x]
    m = statistics.median(xs)
    ratio = f"  {m / b:.3f}x of off ({(m / b - 1) * 100:+.1f}%)" if b else ""
    print(f"median {mode:<10} {m:.1f} MB/s{ratio}")
EOF
