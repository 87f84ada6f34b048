#!/usr/bin/env bash
# bench-peers.sh: replicad side by side with NATS JetStream, its nearest peer
# (a replicated, file-backed, append-only log with acknowledged writes).
#
# Each run starts a fresh 3-node cluster of one system on loopback, its data
# under TMPDIR, loads it with one workload, and stops it: a JetStream cluster
# (nats-server, one stream "benchstream" on subject bench.x, R3, file storage)
# or 3 replicad brokers (partition perf-0, leader 1, replicas and ISR 1,2,3,
# set by LeaderAndIsr by hand as perf-tls.sh does). The two systems alternate
# run by run (odd rounds JetStream first, even rounds replicad first), ROUNDS
# times, and the script prints each run, then each row's medians, ranges and
# the ratio replicad / JetStream. Records are RECORD_SIZE bytes (1 KiB).
#
# The rows, and why each compares like with like:
#   a  throughput, no fsync per write. JetStream with its default sync (fsync
#      every 2 minutes) vs replicad --log-flush os (fsync left to the OS): on
#      both an acknowledged write is in memory or the page cache of the nodes
#      that hold it, which survives a crashed process but not a power cut of
#      them all. 16 producers (CONCURRENCY); each JetStream client keeps 100
#      (BATCH) asynchronous publishes in flight and waits for all their acks
#      (`nats bench js pub async --batch`), each replicad producer sends 100
#      records in one Produce with acks=all and waits for it (`ctlclient perf
#      produce --batch`): 100 records in flight per producer both ways.
#   b  throughput, fsync per write on every replica. JetStream
#      `sync_interval: always` (each node fsyncs its Raft log's entry before it
#      counts toward the commit; nats-server then relaxes the stream's own
#      files to a sync per flush, the Raft log being the durable copy) vs
#      replicad --log-flush every-batch (the leader and each follower fsync
#      each appended batch before it is acknowledged or reported); as a.
#   c  replicad as a, with mutual TLS 1.3 on every connection (certificates
#      from `ctlclient certs init`, --tls-client-auth require, authorization
#      on), against row a's replicad: the price of TLS.
#   d  one synchronous producer, one record per request, waiting for each
#      answer (`nats bench js pub sync`; `ctlclient perf produce --batch 1
#      --concurrency 1 --acks all`), SYNC_RECORDS records: msg/s, p50, p99 at
#      equal durability both ways: d-os (JetStream default vs --log-flush os)
#      and d-fsync (sync_interval: always vs every-batch).
# Both answer a write once it is replicated: a JetStream publish is acknowledged
# when a quorum of the stream's Raft group (2 of 3) holds it, a replicad acks=all
# produce when every ISR member (3 of 3) does, so replicad waits for one copy
# more. The JetStream client connects to the stream leader's server, as the
# replicad client connects to the partition leader, so neither pays a hop to
# forward. Both systems' processes share the same cores (the ratio counts, not
# the absolute figures). On a tmpfs TMPDIR fsync costs nothing and rows b and
# d-fsync say nothing: the header prints the file system.
#
# Needs bin/replicad, bin/ctlclient (`make build`), bin/nats-server and bin/nats
# (`make nats`, pinned in tools/nats/go.mod); `make bench-peers` builds them
# and runs this.
#
# Environment: RECORDS (200000, rows a-c), SYNC_RECORDS (5000, row d),
# RECORD_SIZE (1024), BATCH (100), CONCURRENCY (16), ROUNDS (3), ROWS
# ("a b c d-os d-fsync"), PORT_BASE (27401: replicad on PORT_BASE..+2, NATS
# clients on +10..+12, NATS cluster routes on +20..+22, NATS monitoring on
# +30..+32), RUN_TIMEOUT (300 s, one
# load run), KEEP (set: keep every run's output and logs in KEEP, a directory).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$ROOT/bin}
RECORDS=${RECORDS:-200000}
SYNC_RECORDS=${SYNC_RECORDS:-5000}
RECORD_SIZE=${RECORD_SIZE:-1024}
BATCH=${BATCH:-100}
CONCURRENCY=${CONCURRENCY:-16}
ROUNDS=${ROUNDS:-3}
ROWS=${ROWS:-a b c d-os d-fsync}
PORT_BASE=${PORT_BASE:-27401}
RUN_TIMEOUT=${RUN_TIMEOUT:-300}
KEEP=${KEEP:-}

for b in replicad ctlclient nats-server nats; do
	[[ -x $BIN/$b ]] || { echo "bench-peers: $BIN/$b missing: run make build nats" >&2; exit 2; }
done
for n in RECORDS SYNC_RECORDS RECORD_SIZE BATCH CONCURRENCY ROUNDS RUN_TIMEOUT; do
	[[ ${!n} =~ ^[1-9][0-9]*$ ]] || { echo "bench-peers: $n must be a positive integer, not '${!n}'" >&2; exit 2; }
done
for row in $ROWS; do
	case $row in a | b | c | d-os | d-fsync) ;; *) echo "bench-peers: unknown row '$row' in ROWS" >&2; exit 2 ;; esac
done

. "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/replicad-bench-peers.XXXXXX")
pids=()
# running PID...: whether any of them is still running (an exited child stays a
# zombie until waited for, and kill -0 would count it).
running() {
	local p
	for p; do
		[[ $(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null) =~ ^[^Z]$ ]] && return 0
	done
	return 1
}
# stop_all: SIGTERM to every process started, SIGKILL to any still there 10 s on.
stop_all() {
	((${#pids[@]})) || return 0
	kill -TERM "${pids[@]}" 2>/dev/null || true
	for _ in $(seq 100); do
		running "${pids[@]}" || break
		sleep 0.1
	done
	kill -KILL "${pids[@]}" 2>/dev/null || true
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
cleanup() {
	stop_all
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# The nats CLI keeps contexts under XDG_CONFIG_HOME: none of the user's is read
# or written.
export XDG_CONFIG_HOME=$work/xdg
nats_cli() { "$BIN/nats" --no-context "$@"; }

die() {
	echo "bench-peers: $*" >&2
	exit 1
}

raddr() { echo "127.0.0.1:$((PORT_BASE + $1 - 1))"; }
naddr() { echo "127.0.0.1:$((PORT_BASE + 9 + $1))"; }
nroute() { echo "127.0.0.1:$((PORT_BASE + 19 + $1))"; }
nmon() { echo "127.0.0.1:$((PORT_BASE + 29 + $1))"; }

certs=$work/certs
"$BIN/ctlclient" certs init --dir "$certs" --brokers 3 >/dev/null 2>&1 || die "ctlclient certs init failed"

# start_replicad DIR FLUSH TLS: 3 brokers, partition perf-0 led by 1, ISR 1,2,3.
# Sets client to the flags a ctlclient needs to reach them.
client=()
start_replicad() {
	local dir=$1 flush=$2 tls=$3
	client=()
	[[ $tls == tls ]] && client=(--tls-cert "$certs/admin.crt" --tls-key "$certs/admin.key" --tls-ca "$certs/ca.crt")
	local live=(--live-broker "1=$(raddr 1)" --live-broker "2=$(raddr 2)" --live-broker "3=$(raddr 3)")
	for id in 1 2 3; do
		local flags=()
		[[ $tls == tls ]] && flags=(--tls-cert "$certs/broker-$id.crt" --tls-key "$certs/broker-$id.key"
			--tls-ca "$certs/ca.crt" --tls-client-auth require --super-users spiffe://replicad/admin)
		"$BIN/replicad" --id "$id" --listen "$(raddr "$id")" --log-dirs "$dir/b$id" \
			--log-flush "$flush" "${flags[@]}" >"$dir/b$id.log" 2>&1 &
		pids+=($!)
	done
	for id in 1 2 3; do wait_for "$dir/b$id.log" "replicad listening on"; done
	for id in 1 2 3; do
		"$BIN/ctlclient" --broker "$(raddr "$id")" "${client[@]}" leader-and-isr --controller-id 0 --controller-epoch 1 \
			--topic perf --partition 0 --leader 1 --leader-epoch 1 --replicas 1,2,3 --new "${live[@]}" >/dev/null ||
			die "LeaderAndIsr to broker $id failed"
	done
}

# start_jetstream DIR SYNC: 3 nats-server nodes in one cluster (SYNC: default or
# always), the R3 file stream benchstream on bench.x once its Raft group has a
# leader and both followers are current. Sets nats_url to the leader's server.
nats_url=""
start_jetstream() {
	local dir=$1 sync=$2 sync_line=""
	[[ $sync == always ]] && sync_line="sync_interval: always"
	for id in 1 2 3; do
		cat >"$dir/n$id.conf" <<-EOF
			server_name: n$id
			listen: $(naddr "$id")
			http: $(nmon "$id")
			jetstream {
			  store_dir: "$dir/n$id"
			  $sync_line
			}
			cluster {
			  name: bench
			  listen: $(nroute "$id")
			  routes: [nats-route://$(nroute 1), nats-route://$(nroute 2), nats-route://$(nroute 3)]
			}
		EOF
		"$BIN/nats-server" -c "$dir/n$id.conf" >"$dir/n$id.log" 2>&1 &
		pids+=($!)
	done
	for id in 1 2 3; do wait_for "$dir/n$id.log" "Server is ready"; done
	# What each node runs with, from its monitoring endpoint: a sync setting
	# it did not take would make rows b and d-fsync measure the wrong thing.
	for id in 1 2 3; do
		python3 -c '
import json, sys, urllib.request
v = json.load(urllib.request.urlopen("http://%s/varz" % sys.argv[1], timeout=10))
sys.exit(0 if v["jetstream"]["config"].get("sync_always", False) == (sys.argv[2] == "always") else 1)' \
			"$(nmon "$id")" "$sync" || die "nats-server n$id does not run with sync $sync (see its /varz)"
	done
	local servers="nats://$(naddr 1),nats://$(naddr 2),nats://$(naddr 3)"
	# The JetStream meta group elects its leader after the routes are up: the
	# stream can be created only then (30 s at most).
	local ok=""
	for _ in $(seq 60); do
		if nats_cli -s "$servers" stream add benchstream --subjects bench.x --storage file --replicas 3 \
			--defaults >"$dir/stream-add.out" 2>&1; then
			ok=1
			break
		fi
		sleep 0.5
	done
	[[ -n $ok ]] || { cat "$dir/stream-add.out" >&2; die "no JetStream stream after 30 s"; }
	local leader=""
	for _ in $(seq 60); do
		leader=$(nats_cli -s "$servers" stream info benchstream --json 2>/dev/null | python3 -c '
import json, sys
c = json.load(sys.stdin).get("cluster", {})
reps = c.get("replicas") or []
if c.get("leader") and len(reps) == 2 and all(r.get("current") for r in reps):
    print(c["leader"])' || true)
		[[ -n $leader ]] && break
		sleep 0.5
	done
	[[ $leader =~ ^n[123]$ ]] || die "the JetStream stream has no leader with 2 current followers after 30 s"
	nats_url="nats://$(naddr "${leader#n}")"
}

# result SYSTEM ROW ROUND MSGPS P50MS P99MS: one run's figures, kept for the
# summary and printed.
result() {
	echo "$*" >>"$work/results"
	printf '  round %d  %-8s %-10s %10.0f msg/s' "$3" "$2" "$1" "$4"
	[[ $5 != - ]] && printf '  p50 %6.3f ms  p99 %6.3f ms' "$5" "$6"
	printf '\n'
}

# run_replicad ROW ROUND
run_replicad() {
	local row=$1 round=$2 dir=$work/r-$1-$2 flush=os tls=plain batch=$BATCH conc=$CONCURRENCY records=$RECORDS
	case $row in
	b | d-fsync) flush=every-batch ;;
	esac
	[[ $row == c ]] && tls=tls
	[[ $row == d-* ]] && { batch=1 conc=1 records=$SYNC_RECORDS; }
	mkdir -p "$dir"
	start_replicad "$dir" "$flush" "$tls"
	timeout "$RUN_TIMEOUT" "$BIN/ctlclient" --broker "$(raddr 1)" "${client[@]}" -o json perf produce --topic perf \
		--records "$records" --record-size "$RECORD_SIZE" --batch "$batch" --acks all \
		--concurrency "$conc" >"$dir/perf.json" 2>"$dir/perf.err" || {
		cat "$dir/perf.err" >&2
		die "replicad row $row round $round: ctlclient perf produce failed"
	}
	stop_all
	local fig
	fig=$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print("%.1f %.3f %.3f" % (r["recordsPerSec"], r["latencyP50Ms"], r["latencyP99Ms"]))' "$dir/perf.json")
	set -- $fig
	if [[ $row == d-* ]]; then result replicad "$row" "$round" "$1" "$2" "$3"; else result replicad "$row" "$round" "$1" - -; fi
	finish_run "$dir"
}

# run_jetstream ROW ROUND
run_jetstream() {
	local row=$1 round=$2 dir=$work/j-$1-$2 sync=default
	case $row in
	b | d-fsync) sync=always ;;
	esac
	mkdir -p "$dir"
	start_jetstream "$dir" "$sync"
	local bench=(pub async bench.x --batch "$BATCH" --clients "$CONCURRENCY" --msgs "$RECORDS")
	[[ $row == d-* ]] && bench=(pub sync bench.x --clients 1 --msgs "$SYNC_RECORDS")
	timeout "$RUN_TIMEOUT" "$BIN/nats" --no-context -s "$nats_url" bench js "${bench[@]}" --stream benchstream \
		--size "${RECORD_SIZE}B" --no-progress --csv "$dir/bench.csv" >"$dir/bench.out" 2>&1 || {
		cat "$dir/bench.out" >&2
		die "JetStream row $row round $round: nats bench failed"
	}
	stop_all
	# The aggregate rate from the summary line ("... stats: 12,345 msgs/sec"),
	# the single client's latencies from the CSV (microseconds).
	local fig
	fig=$(python3 -c '
import csv, re, sys
out = open(sys.argv[1]).read()
rates = re.findall(r"(?:aggregated|publisher) stats: ([\d,.]+) msgs/sec", out)
if not rates:
    sys.exit("no msgs/sec in nats bench output:\n" + out)
rows = [r for r in csv.reader(open(sys.argv[2])) if r and not r[0].startswith("#")]
p50 = p99 = float("nan")
if len(rows) == 1:
    p50, p99 = float(rows[0][10]) / 1000, float(rows[0][12]) / 1000
print("%s %.3f %.3f" % (rates[-1].replace(",", ""), p50, p99))' "$dir/bench.out" "$dir/bench.csv") ||
		die "JetStream row $row round $round: cannot read nats bench's output"
	set -- $fig
	if [[ $row == d-* ]]; then result jetstream "$row" "$round" "$1" "$2" "$3"; else result jetstream "$row" "$round" "$1" - -; fi
	finish_run "$dir"
}

finish_run() {
	if [[ -n $KEEP ]]; then
		mkdir -p "$KEEP"
		# the logs, configurations and the load tool's output, not the data
		mkdir -p "$KEEP/${1##*/}"
		find "$1" -maxdepth 1 -type f -exec cp {} "$KEEP/${1##*/}/" \;
	fi
	rm -rf "$1"
}

fs=$(df -PT "$work" | awk 'NR == 2 { print $2 }')
echo "bench-peers: nats-server $("$BIN/nats-server" --version | awk '{ print $2 }'), replicad $("$BIN/replicad" --version 2>&1 | head -1)"
echo "  3 nodes each on loopback, $(nproc) cores, data in $work ($fs), $RECORD_SIZE B records, ROUNDS=$ROUNDS"
echo "  rows a-c: $RECORDS records, $CONCURRENCY producers, $BATCH in flight each; row d: $SYNC_RECORDS records, 1 producer, 1 at a time"
[[ $fs == tmpfs ]] && echo "  warning: $work is on tmpfs, where fsync costs nothing: rows b and d-fsync compare nothing"
for round in $(seq "$ROUNDS"); do
	for row in $ROWS; do
		if [[ $row == c ]]; then
			run_replicad "$row" "$round"
		elif ((round % 2)); then
			run_jetstream "$row" "$round"
			run_replicad "$row" "$round"
		else
			run_replicad "$row" "$round"
			run_jetstream "$row" "$round"
		fi
	done
done

python3 - "$work/results" <<'PY'
import statistics, sys

runs = {}
for line in open(sys.argv[1]):
    system, row, _round, rate, p50, p99 = line.split()
    runs.setdefault((row, system), []).append(
        (float(rate), None if p50 == "-" else float(p50), None if p99 == "-" else float(p99)))

titles = {
    "a": "throughput, no fsync per write (JetStream default; replicad --log-flush os)",
    "b": "throughput, fsync per write on every replica (sync_interval: always; every-batch)",
    "c": "replicad with mutual TLS, as row a",
    "d-os": "1 sync producer, 1 record a request, no fsync (default; os)",
    "d-fsync": "1 sync producer, 1 record a request, fsync (always; every-batch)",
}

def cell(xs):
    if not xs:
        return ""
    rates = [x[0] for x in xs]
    s = f"{statistics.median(rates):,.0f} msg/s"
    if len(rates) > 1:
        s += f" ({min(rates):,.0f}-{max(rates):,.0f})"
    if xs[0][1] is not None:
        s += f", p50 {statistics.median(x[1] for x in xs):.2f} ms, p99 {statistics.median(x[2] for x in xs):.2f} ms"
    return s

def med(xs):
    return statistics.median(x[0] for x in xs) if xs else None

print()
print("medians over the rounds (range of msg/s in brackets); ratio: replicad / JetStream (msg/s: above 1 is")
print("replicad ahead; latency: above 1 is replicad slower)")
print()
print("| row | workload | NATS JetStream | replicad | ratio |")
print("|---|---|---|---|---|")
for row in ["a", "b", "c", "d-os", "d-fsync"]:
    js, rd = runs.get((row, "jetstream"), []), runs.get((row, "replicad"), [])
    if not js and not rd:
        continue
    ratio = ""
    if js and rd:
        ratio = f"{med(rd) / med(js):.2f}x"
        if rd[0][1] is not None:
            lat = [statistics.median(x[i] for x in rd) / statistics.median(x[i] for x in js) for i in (1, 2)]
            ratio += f" (latency: p50 {lat[0]:.2f}x, p99 {lat[1]:.2f}x)"
    elif row == "c" and runs.get(("a", "replicad")):
        ratio = f"{med(rd) / med(runs[('a', 'replicad')]):.2f}x of row a's replicad"
    print(f"| {row} | {titles[row]} | {cell(js)} | {cell(rd)} | {ratio} |")
PY
