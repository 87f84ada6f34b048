#!/usr/bin/env bash
# perf-tls.sh: what TLS costs an acks=all producer.
#
# Runs 3 `replicad --log-flush os` brokers on loopback (partition perf-0, leader 1,
# ISR 1,2,3), then `ctlclient perf produce --acks all` against them, in two
# configurations, alternating, ROUNDS times each on fresh brokers:
#   plain  no --tls-* flag (plaintext)
#   tls    mutual TLS 1.3 everywhere: each broker with its certificate from
#          `ctlclient certs init`, --tls-client-auth require; the followers'
#          fetch streams and ctlclient's produce calls over TLS; authorization
#          is on, and the admin certificate, which sends LeaderAndIsr by hand
#          and produces, is a superuser
# and prints each run's MB/s and p99, then each configuration's median and its
# ratio to "plain". Needs bin/replicad and bin/ctlclient (`make build`).
#
# Environment: RECORDS (200000), RECORD_SIZE (1024), BATCH (100), CONCURRENCY (4),
# ROUNDS (3), PORT_BASE (29191: brokers on PORT_BASE..+2), MODES ("plain tls").
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
RECORDS=${RECORDS:-200000}
RECORD_SIZE=${RECORD_SIZE:-1024}
BATCH=${BATCH:-100}
CONCURRENCY=${CONCURRENCY:-4}
ROUNDS=${ROUNDS:-3}
PORT_BASE=${PORT_BASE:-29191}
MODES=${MODES:-plain tls}

for b in replicad ctlclient; do
	[[ -x $BIN/$b ]] || { echo "perf-tls: $BIN/$b missing: run make build" >&2; exit 2; }
done

. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/replicad-perf-tls.XXXXXX")
broker_pids=()
cleanup() {
	stop_brokers
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

certs=$work/certs
"$BIN/ctlclient" certs init --dir "$certs" --brokers 3 >/dev/null 2>&1

addr() { echo "127.0.0.1:$((PORT_BASE + $1 - 1))"; }
live=(--live-broker "1=$(addr 1)" --live-broker "2=$(addr 2)" --live-broker "3=$(addr 3)")

run() {
	local mode=$1 round=$2 dir=$work/$1-$2 client=()
	case $mode in
	plain) ;;
	tls) client=(--tls-cert "$certs/admin.crt" --tls-key "$certs/admin.key" --tls-ca "$certs/ca.crt") ;;
	*) echo "perf-tls: unknown mode $mode" >&2; exit 2 ;;
	esac
	mkdir -p "$dir"
	for id in 1 2 3; do
		local flags=()
		[[ $mode == tls ]] && flags=(--tls-cert "$certs/broker-$id.crt" --tls-key "$certs/broker-$id.key" \
			--tls-ca "$certs/ca.crt" --tls-client-auth require --super-users spiffe://replicad/admin)
		"$BIN/replicad" --id "$id" --listen "$(addr "$id")" --log-dirs "$dir/b$id" \
			--log-flush os "${flags[@]}" >"$dir/b$id.log" 2>&1 &
		broker_pids+=($!)
	done
	for id in 1 2 3; do wait_for "$dir/b$id.log" "replicad listening on"; done
	for id in 1 2 3; do
		"$BIN/ctlclient" --broker "$(addr "$id")" "${client[@]}" leader-and-isr --controller-id 0 --controller-epoch 1 \
			--topic perf --partition 0 --leader 1 --leader-epoch 1 --replicas 1,2,3 --new "${live[@]}" >/dev/null
	done
	"$BIN/ctlclient" --broker "$(addr 1)" "${client[@]}" -o json perf produce --topic perf \
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
		printf '  round %d %-6s %s MB/s  p99 %s ms\n' "$round" "$mode" "${r%% *}" "${r##* }"
	done
done
python3 - "${results[plain]:-}" $(for m in $MODES; do printf '%s=%s ' "$m" "${results[$m]// /,}"; done) <<'PY'
import statistics, sys
base = [float(x) for x in sys.argv[1].split()] if sys.argv[1].strip() else []
b = statistics.median(base) if base else None
for arg in sys.argv[2:]:
    mode, _, vals = arg.partition("=")
    xs = [float(x) for x in vals.split(",") if x]
    m = statistics.median(xs)
    ratio = f"  {m / b:.3f}x of plain ({(m / b - 1) * 100:+.1f}%)" if b else ""
    print(f"median {mode:<6} {m:.1f} MB/s{ratio}")
PY
