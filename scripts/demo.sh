#!/usr/bin/env bash
# make demo: a controller and three brokers on loopback, and an automatic failover.
#
#   1. start the controller (embedded bbolt store) on 127.0.0.1:9090 and brokers 1-3
#      on 127.0.0.1:9091-9093, which register with it
#   2. create topic "demo" (1 partition, 3 replicas)
#   3. produce with acks=all in the background, recording every acknowledged record
#   4. kill -9 the leader; the controller fences it and elects another ISR member
#   5. check that every acknowledged record is in the log, at its offset, in order
#   6. restart the killed broker and watch it rejoin the ISR
#   7. leave the cluster running with commands to try; Ctrl-C stops it cleanly
#
# Everything lives under .demo/ (wiped at start); each process logs to .demo/logs/.
# DEMO_NONINTERACTIVE=1 (or --non-interactive) runs the steps, stops the cluster
# and exits 0 on success, 1 on any failure. OTEL_EXPORTER_OTLP_ENDPOINT, when set,
# is passed on: the controller, the brokers and ctlclient export their spans there.
# Every connection is mutual TLS with authorization on: `ctlclient certs init` makes
# development certificates in .demo/certs; DEMO_PLAINTEXT=1 (or --plaintext) runs
# plaintext instead (grpcurl -plaintext, no certificates).
# The binaries come from bin/ (make demo builds them first). For tests: DEMO_BIN (the binaries'
# dir), DEMO_DIR (instead of .demo) and DEMO_PORT (the controller's port, brokers on the next 3).
#
# Ctrl-C with the output piped (make demo | tee demo.log) kills the reader too; the next write
# then raises SIGPIPE, which by default kills bash before its EXIT trap can stop the cluster (the
# daemons run in process groups of their own, so the Ctrl-C never reached them). The PIPE trap
# below sends the rest of the output to stderr instead, and cleanup runs without errexit, so the
# cluster is always stopped (tests/integration's TestDemoCtrlCThroughDeadPipe).
# shellcheck disable=SC2317 # functions called through wait_for and traps are reachable
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
	cat <<'EOF'
usage: scripts/demo.sh [--non-interactive] [--plaintext]   (normally: make demo)

Starts a controller and three replicad brokers on 127.0.0.1:9090-9093, shows a
leader failover under an acks=all producer, and leaves the cluster running until
Ctrl-C. --non-interactive (or DEMO_NONINTERACTIVE=1) stops it after the steps.
Every connection is mutual TLS with authorization on (development certificates in
.demo/certs); --plaintext (or DEMO_PLAINTEXT=1) runs without TLS.
Environment: DEMO_RECORDS (default 2000), OTEL_EXPORTER_OTLP_ENDPOINT.
EOF
}

NONINTERACTIVE=${DEMO_NONINTERACTIVE:-}
[ "$NONINTERACTIVE" = 0 ] && NONINTERACTIVE=
PLAINTEXT=${DEMO_PLAINTEXT:-}
[ "$PLAINTEXT" = 0 ] && PLAINTEXT=
for arg in "$@"; do
	case $arg in
	--non-interactive | --no-wait) NONINTERACTIVE=1 ;;
	--plaintext) PLAINTEXT=1 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

BIN=${DEMO_BIN:-./bin}
DEMO=${DEMO_DIR:-.demo}
PORT=${DEMO_PORT:-9090}
LOGS=$DEMO/logs
PIDS=$DEMO/pids
CONTROLLER=127.0.0.1:$PORT
BROKER_IDS=(1 2 3)
TOPIC=demo
RECORDS=${DEMO_RECORDS:-2000}
BATCH=100                # records per produce request
SESSION_TIMEOUT=3s       # a broker silent this long is fenced (default 6s)
SHUTDOWN_TIMEOUT=5s      # --controlled-shutdown-timeout (default 30s)
ACKED=$DEMO/acked.tsv    # offset<TAB>value of every acknowledged record
CONSUMED=$DEMO/consumed.tsv
CERTS=$DEMO/certs
ADMIN=spiffe://replicad/admin
# The demo's own settings, not the caller's.
unset CTLCLIENT_BROKER CTLCLIENT_CONTROLLER CTLCLIENT_TLS_CERT CTLCLIENT_TLS_KEY CTLCLIENT_TLS_CA CTLCLIENT_TLS_CLIENT_AUTH
# tls_args NAME: the --tls-* flags of the process whose certificate is NAME (none
# in plaintext). Servers require client certificates, so authorization is on; the
# admin certificate is a superuser, as the demo produces and consumes with it.
tls_args() {
	[ -n "$PLAINTEXT" ] && return 0
	echo "--tls-cert $CERTS/$1.crt --tls-key $CERTS/$1.key --tls-ca $CERTS/ca.crt --tls-client-auth require --super-users $ADMIN"
}

# ---------------------------------------------------------------- output
if [ -t 1 ]; then
	B=$'\033[1m' D=$'\033[2m' G=$'\033[32m' R=$'\033[31m' N=$'\033[0m'
else
	B='' D='' G='' R='' N=''
fi
STEPS=7
step_no=0
step() {
	step_no=$((step_no + 1))
	printf '\n%s[%d/%d] %s%s  %s(t+%ss)%s\n' "$B" "$step_no" "$STEPS" "$1" "$N" "$D" "$(secs $(($(now_ms) - DEMO_START)))" "$N"
	shift
	local line
	for line in "$@"; do printf '%s      %s%s\n' "$D" "$line" "$N"; done
}
say() { printf '      %s\n' "$*"; }
ok() { printf '      %s%s%s\n' "$G" "$*" "$N"; }
show() { printf '%s$ %s%s\n' "$D" "$*" "$N"; } # a command as the reader would type it
fail() {
	printf '\n%sFAILED: %s%s\n' "$R" "$*" "$N" >&2
	printf 'Logs: %s/*.log\n' "$LOGS" >&2
	exit 1
}

# Milliseconds since the epoch (EPOCHREALTIME: bash 5; else whole seconds).
now_ms() {
	if [ -n "${EPOCHREALTIME:-}" ]; then
		local us=${EPOCHREALTIME//[!0-9]/}
		echo $((10#$us / 1000))
	else
		echo $(($(date +%s) * 1000))
	fi
}
# secs MS: MS as seconds with one decimal.
secs() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }

# ---------------------------------------------------------------- ctlclient
# ctl: ctlclient against the controller, shown as typed (tracing on when configured).
ctl() {
	show "./bin/ctlclient --controller $CONTROLLER $*"
	"$BIN/ctlclient" --controller "$CONTROLLER" "$@"
}
# quiet: ctlclient for the script's own polling: short timeout, no tracing (a poll
# every 100ms would flood the trace backend).
quiet() {
	env -u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_TRACES_ENDPOINT \
		"$BIN/ctlclient" --controller "$CONTROLLER" --timeout 2s "$@"
}

# cluster_json: describe-cluster as one line of protojson (empty if the controller
# does not answer). Parsed with grep and sed, so the demo needs neither jq nor python.
# protojson leaves out zero values: no "partition" is partition 0, no "alive" is false.
cluster_json() { quiet describe-cluster -o json 2>/dev/null | tr -d ' \t\r\n' || true; }
# partition_obj JSON: the {...} of TOPIC-0. Partition objects start with "topic"
# (its field number is 1), brokers with "id".
partition_obj() {
	printf '%s\n' "$1" | grep -o "{\"topic\":\"$TOPIC\"[^}]*}" | grep -v '"partition":[1-9]' | head -n 1 || true
}
leader_of() { printf '%s\n' "$1" | sed -n 's/.*"leader":\(-\{0,1\}[0-9]*\).*/\1/p'; }      # empty: none
epoch_of() { # absent: 0
	local e
	e=$(printf '%s\n' "$1" | sed -n 's/.*"leaderEpoch":\([0-9]*\).*/\1/p')
	echo "${e:-0}"
}
isr_of() { printf '%s\n' "$1" | sed -n 's/.*"isr":\[\([0-9,]*\)\].*/\1/p'; }
in_list() { case ",$2," in *",$1,"*) return 0 ;; esac; return 1; } # in_list ID 1,2,3
alive() { printf '%s\n' "$1" | grep -q "{\"id\":$2,[^}]*\"alive\":true"; }
addr_of() { echo "127.0.0.1:$((PORT + $1))"; }

# wait_for SECONDS WHAT CMD...: poll CMD every 100ms until it succeeds, or fail.
wait_for() {
	local limit=$(($1 * 1000)) what=$2 start
	shift 2
	start=$(now_ms)
	until "$@"; do
		if (($(now_ms) - start > limit)); then fail "$what: not within ${limit%000}s"; fi
		sleep 0.1
	done
}

# ---------------------------------------------------------------- processes
# Daemons run in their own process group (set -m while starting them), so a
# Ctrl-C in the terminal reaches only this script, which then stops them in order.
CONTROLLER_PID=
BROKER_PID=()
PRODUCER_PID=
spawn() { # spawn LOG CMD...: start CMD in the background; its pid in SPAWNED
	local log=$1
	shift
	set -m
	"$@" </dev/null >>"$log" 2>&1 &
	SPAWNED=$!
	set +m
}
running() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

start_controller() {
	# shellcheck disable=SC2046 # tls_args is a list of flags
	spawn "$LOGS/controller.log" "$BIN/replicad" controller --listen "$CONTROLLER" \
		--store "$DEMO/controller" --session-timeout "$SESSION_TIMEOUT" $(tls_args controller)
	CONTROLLER_PID=$SPAWNED
	echo "$CONTROLLER_PID" >"$PIDS/controller"
}
start_broker() { # start_broker ID
	# shellcheck disable=SC2046 # tls_args is a list of flags
	spawn "$LOGS/broker-$1.log" "$BIN/replicad" --id "$1" --listen "$(addr_of "$1")" \
		--log-dirs "$DEMO/broker-$1" --controller "$CONTROLLER" --min-insync-replicas 2 \
		--controlled-shutdown-timeout "$SHUTDOWN_TIMEOUT" $(tls_args "broker-$1")
	BROKER_PID[$1]=$SPAWNED
	echo "$SPAWNED" >"$PIDS/broker-$1"
}
broker_cmd() { echo "./bin/replicad --id $1 --listen $(addr_of "$1") --log-dirs $DEMO/broker-$1 --controller $CONTROLLER --min-insync-replicas 2 $(tls_args "broker-$1")"; }

# stop_pids NAME=PID...: SIGTERM to each (after SIGCONT, in case it was paused with
# kill -STOP), then wait for each and report how it ended.
STOP_FAILED=
STOP_STEP= # set when the last step already announced the stop
stop_pids() {
	local t0 arg name pid rc alive=()
	t0=$(now_ms)
	for arg in "$@"; do
		pid=${arg#*=}
		if running "$pid"; then
			alive+=("$pid")
			kill -CONT "$pid" 2>/dev/null || true
			kill -TERM "$pid" 2>/dev/null || true
		fi
	done
	for arg in "$@"; do
		name=${arg%=*} pid=${arg#*=} rc=0
		wait "$pid" 2>/dev/null || rc=$?
		case " ${alive[*]:-} " in
		*" $pid "*) ;;
		*) say "$name had already exited (status $rc)"; continue ;;
		esac
		if [ "$rc" = 0 ]; then
			say "$name stopped (exit 0, after $(secs $(($(now_ms) - t0)))s)"
		else
			say "$name exited with status $rc (see $LOGS/)"
			STOP_FAILED=1
		fi
	done
}

cleanup() {
	local rc=$? id brokers=()
	# Whatever fails from here on (a write to a dead pipe), every process is stopped.
	set +e
	trap - EXIT INT TERM
	trap '' INT # a second Ctrl-C must not leave processes behind
	if [ -n "$PRODUCER_PID" ]; then
		kill -TERM -- "-$PRODUCER_PID" 2>/dev/null || true
		wait "$PRODUCER_PID" 2>/dev/null || true
	fi
	for id in "${BROKER_IDS[@]}"; do
		[ -n "${BROKER_PID[$id]:-}" ] && brokers+=("broker $id=${BROKER_PID[$id]}")
	done
	if [ ${#brokers[@]} -eq 0 ] && [ -z "$CONTROLLER_PID" ]; then
		exit "$rc" # nothing was started
	fi
	[ -n "$STOP_STEP" ] || printf '\n%sStopping the cluster%s\n' "$B" "$N"
	if [ ${#brokers[@]} -gt 0 ]; then
		say "SIGTERM to every broker: each asks the controller to move its leaderships away"
		say "(controlled shutdown), then checkpoints its HWs, flushes and exits. The last replica of"
		say "a partition has nobody to hand it to: it serves on for --controlled-shutdown-timeout=$SHUTDOWN_TIMEOUT."
		stop_pids "${brokers[@]}"
	fi
	if [ -n "$CONTROLLER_PID" ]; then
		say "Then SIGTERM to the controller."
		stop_pids "controller=$CONTROLLER_PID"
	fi
	wait 2>/dev/null || true
	if [ -n "$STOP_FAILED" ] && [ "$rc" = 0 ]; then rc=1; fi
	if [ "$rc" = 0 ]; then echo "stopped"; else echo "stopped (exit status $rc)"; fi
	exit "$rc"
}
trap cleanup EXIT
# SIGPIPE: the reader of stdout is gone (see the header). The output goes on to stderr, and if
# that is gone too, nowhere; the write that raised it fails, which ends the steps (errexit) and
# runs cleanup, or is ignored where the script is stopping anyway.
STDOUT_GONE=
on_pipe() {
	if [ -z "$STDOUT_GONE" ]; then
		STDOUT_GONE=1
		exec 1>&2
	else
		exec 1>/dev/null 2>&1
	fi
}
trap on_pipe PIPE
# Ctrl-C while the cluster waits for it is the normal way out (exit 0); during
# the steps it is an interruption (exit 130). Either way cleanup stops everything.
WAITING=
on_signal() {
	if [ -n "$WAITING" ]; then
		echo || true
		exit 0
	fi
	printf '\nInterrupted.\n' || true
	exit 130
}
trap on_signal INT TERM

# ---------------------------------------------------------------- producer
# produce_all: RECORDS records rec-00001.. in batches of BATCH, acks=all, through
# the controller (ctlclient finds the leader and retries NOT_LEADER_OR_FOLLOWER
# and unreachable leaders for up to --timeout). A batch whose produce exits 0 was
# acknowledged by the ISR: its records go to ACKED with their offsets (base offset
# printed by produce + index). A batch that fails is sent again (at least once).
produce_all() {
	local next=1 i v n base out failures=0 t0 args vals
	t0=$(now_ms)
	while ((next <= RECORDS)); do
		args=() vals=()
		for ((i = next; i < next + BATCH && i <= RECORDS; i++)); do
			printf -v v 'rec-%05d' "$i"
			vals+=("$v")
			args+=(--value "$v")
		done
		if out=$("$BIN/ctlclient" --controller "$CONTROLLER" --timeout 20s produce --topic "$TOPIC" \
			--partition 0 --acks all --timeout-ms 10000 "${args[@]}" 2>>"$LOGS/producer.log"); then
			base=$(printf '%s\n' "$out" | tail -n 1)
			n=0
			for i in "${vals[@]}"; do printf '%d\t%s\n' $((base + n)) "$i"; n=$((n + 1)); done >>"$ACKED"
			printf '%s ok %s..%s at offset %s\n' "$(($(now_ms) - t0))" "${vals[0]}" "${vals[${#vals[@]} - 1]}" "$base" >>"$LOGS/producer.log"
			next=$((next + ${#vals[@]}))
		else
			failures=$((failures + 1))
			printf '%s failed %s..%s: sending it again\n' "$(($(now_ms) - t0))" "${vals[0]}" "${vals[${#vals[@]} - 1]}" >>"$LOGS/producer.log"
			if ((failures > 20)); then
				echo "giving up after $failures failed batches" >>"$LOGS/producer.log"
				exit 1
			fi
			sleep 0.2
		fi
	done
}
acked_count() { if [ -f "$ACKED" ]; then wc -l <"$ACKED" | tr -d ' '; else echo 0; fi; }

# ================================================================ the demo
for b in ctlclient replicad; do
	[ -x "$BIN/$b" ] || { echo "$BIN/$b is missing: run 'make demo' (or 'make build' first)" >&2; exit 1; }
done
# A port in use is a previous demo still running, or something else.
for port in $PORT $((PORT + 1)) $((PORT + 2)) $((PORT + 3)); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "${R}port 127.0.0.1:$port is already in use${N}: the demo needs 127.0.0.1:$PORT-$((PORT + 3))." >&2
		echo "A previous 'make demo' still running? See who holds it: ss -ltnp 'sport = :$port' (or lsof -i :$port)." >&2
		exit 1
	fi
done

rm -rf "$DEMO"
mkdir -p "$LOGS" "$PIDS"
DEMO_START=$(now_ms)
if [ -z "$PLAINTEXT" ]; then
	"$BIN/ctlclient" certs init --dir "$CERTS" --brokers 3 >/dev/null
	# ctlclient (the demo's calls and yours) uses the admin certificate.
	export CTLCLIENT_TLS_CERT=$CERTS/admin.crt CTLCLIENT_TLS_KEY=$CERTS/admin.key CTLCLIENT_TLS_CA=$CERTS/ca.crt
fi

printf '%sreplicad demo%s: a controller and three brokers on loopback, and a leader failover.\n' "$B" "$N"
printf 'Data: %s/ (wiped at every start). Logs: %s/controller.log, %s/broker-{1,2,3}.log, %s/producer.log\n' "$DEMO" "$LOGS" "$LOGS" "$LOGS"
if [ -z "$PLAINTEXT" ]; then
	echo "Security: mutual TLS on every connection, authorization on. Development certificates (for"
	echo "          development only) in $CERTS/, from 'ctlclient certs init'; ctlclient uses admin.crt."
	echo "          DEMO_PLAINTEXT=1 make demo runs without TLS."
else
	echo "Security: off (plaintext, DEMO_PLAINTEXT=1): anyone who reaches a port may call anything."
fi
if [ -n "${OTEL_EXPORTER_OTLP_ENDPOINT:-}${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-}" ]; then
	ep=${OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:-$OTEL_EXPORTER_OTLP_ENDPOINT}
	hp=${ep#*://}
	hp=${hp%%/*}
	case $hp in *:*) ;; *) hp=$hp:4317 ;; esac
	if (exec 3<>"/dev/tcp/${hp%:*}/${hp##*:}") 2>/dev/null; then
		echo "Tracing: spans go to $ep over OTLP/gRPC (service.name replicad, replicad-controller, ctlclient)."
	else
		echo "${R}Tracing: $ep does not answer${N}; tracing is off for this demo (an unreachable"
		echo "collector makes every ctlclient call wait for its spans to flush)."
		unset OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
	fi
else
	if grep -q '^jaeger:' Makefile 2>/dev/null; then
		echo "Tracing: off. To see the failover as traces: 'make jaeger' in another terminal, then"
		echo "         OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 make demo"
	else
		echo "Tracing: off (set OTEL_EXPORTER_OTLP_ENDPOINT, e.g. http://127.0.0.1:4317, to export spans)."
	fi
fi

# ---------------------------------------------------------------- 1
step "Start the controller on $CONTROLLER, and brokers 1, 2, 3 on 127.0.0.1:$((PORT + 1))-$((PORT + 3))" \
	"The controller keeps the cluster metadata (bbolt file in $DEMO/controller), tracks which" \
	"brokers are alive (session timeout $SESSION_TIMEOUT) and elects partition leaders. Each broker" \
	"registers with it, gets a broker epoch, and heartbeats. --min-insync-replicas 2: an acks=all" \
	"write needs two in-sync copies before it is acknowledged."
show "./bin/replicad controller --listen $CONTROLLER --store $DEMO/controller --session-timeout $SESSION_TIMEOUT $(tls_args controller) &"
start_controller
controller_up() {
	running "$CONTROLLER_PID" || { cat "$LOGS/controller.log" >&2; fail "the controller exited"; }
	grep -q "replicad controller listening on" "$LOGS/controller.log"
}
wait_for 30 "the controller did not start listening" controller_up
for id in "${BROKER_IDS[@]}"; do
	show "$(broker_cmd "$id") &"
	start_broker "$id"
done
brokers_alive() {
	local id j
	for id in "${BROKER_IDS[@]}"; do
		running "${BROKER_PID[$id]}" || { tail -n 20 "$LOGS/broker-$id.log" >&2; fail "broker $id exited"; }
	done
	j=$(cluster_json)
	for id in "${BROKER_IDS[@]}"; do alive "$j" "$id" || return 1; done
}
wait_for 60 "the three brokers did not all register" brokers_alive
ok "controller and 3 brokers up ($(secs $(($(now_ms) - DEMO_START)))s)"

# ---------------------------------------------------------------- 2
step "Create topic \"$TOPIC\": 1 partition, 3 replicas" \
	"The controller assigns the replicas, picks a leader, persists that, and only then tells the" \
	"brokers (LeaderAndIsr). Followers start fetching from the leader."
ctl create-topic --topic "$TOPIC" --partitions 1 --replication-factor 3
topic_ready() {
	local obj
	obj=$(partition_obj "$(cluster_json)")
	[ -n "$(leader_of "$obj")" ] && [ "$(leader_of "$obj")" -ge 0 ] && [ "$(isr_of "$obj")" != "" ] &&
		in_list 1 "$(isr_of "$obj")" && in_list 2 "$(isr_of "$obj")" && in_list 3 "$(isr_of "$obj")"
}
wait_for 30 "$TOPIC-0 did not get a leader and a full ISR" topic_ready
echo
say "Before the failover:"
ctl describe-cluster
if [ -z "$PLAINTEXT" ]; then
	# Authorization at work: a client certificate may not delete a topic (only admin may).
	echo
	say "Authorization: the client certificate may not delete the topic, and nothing changes:"
	show "CTLCLIENT_TLS_CERT=$CERTS/client.crt CTLCLIENT_TLS_KEY=$CERTS/client.key ./bin/ctlclient --controller $CONTROLLER delete-topic --topic $TOPIC"
	if out=$(CTLCLIENT_TLS_CERT=$CERTS/client.crt CTLCLIENT_TLS_KEY=$CERTS/client.key quiet delete-topic --topic "$TOPIC" 2>&1); then
		fail "the client certificate deleted the topic: $out"
	fi
	printf '%s\n' "$out" | sed 's/^/      /'
	case $out in *PermissionDenied* | *"may not call"*) ;; *) fail "the refusal was not PermissionDenied: $out" ;; esac
	topic_ready || fail "$TOPIC-0 changed after a refused delete"
fi

# The leader to kill in step 4, looked up now so the kill comes right on cue.
OBJ=$(partition_obj "$(cluster_json)")
OLD=$(leader_of "$OBJ")
OLD_EPOCH=$(epoch_of "$OBJ")
if [ -z "$OLD" ] || [ -z "${BROKER_PID[OLD]:-}" ]; then fail "could not find the leader of $TOPIC-0 ($OBJ)"; fi

# ---------------------------------------------------------------- 3
step "Produce $RECORDS records with acks=all, in the background" \
	"Batches of $BATCH, each acknowledged only once the ISR has it. Every acknowledged record" \
	"is written to $ACKED with its offset: that is what must survive the failover."
show "./bin/ctlclient --controller $CONTROLLER produce --topic $TOPIC --partition 0 --acks all --value rec-00001 ... --value rec-$(printf %05d $BATCH)   # and so on, $((RECORDS / BATCH)) batches"
: >"$ACKED"
set -m
produce_all &
PRODUCER_PID=$!
set +m
KILL_AT=$((RECORDS / 4))
enough_acked() {
	running "$PRODUCER_PID" || [ "$(acked_count)" -ge "$RECORDS" ] || fail "the producer stopped early (see $LOGS/producer.log)"
	[ "$(acked_count)" -ge "$KILL_AT" ]
}
wait_for 60 "the producer did not get $KILL_AT records acknowledged" enough_acked
ok "$(acked_count) records acknowledged so far; the producer keeps going"

# ---------------------------------------------------------------- 4
step "Kill the leader, broker $OLD, with kill -9 (no goodbye to the controller)" \
	"Its heartbeats stop. After the session timeout ($SESSION_TIMEOUT) the controller fences it, elects" \
	"another ISR member, bumps the leader epoch, persists that and tells the brokers. The producer" \
	"sees NOT_LEADER_OR_FOLLOWER / an unreachable leader and retries at the new one."
show "kill -9 ${BROKER_PID[$OLD]}   # broker $OLD, pid from $PIDS/broker-$OLD"
KILL_T=$(now_ms)
# (stderr off while bash reaps it, or it reports "Killed" with the command line)
{ kill -9 "${BROKER_PID[$OLD]}" && wait "${BROKER_PID[$OLD]}"; } 2>/dev/null || true
ACKED_AT_KILL=$(acked_count)
BROKER_PID[OLD]=
say "killed; $ACKED_AT_KILL records had been acknowledged"
last_print=0
NEW=
while :; do
	el=$(($(now_ms) - KILL_T))
	J=$(cluster_json)
	OBJ=$(partition_obj "$J")
	l=$(leader_of "$OBJ")
	if [ -n "$l" ] && [ "$l" != "$OLD" ] && [ "$l" -ge 0 ]; then
		NEW=$l
		FAILOVER_MS=$el
		break
	fi
	if ((el - last_print >= 1000)); then
		last_print=$el
		if alive "$J" "$OLD"; then
			state="the controller still counts broker $OLD alive (its session has not expired)"
		else
			state="broker $OLD fenced, electing"
		fi
		say "+$(secs "$el")s  $state; leader ${l:-none}, ISR $(isr_of "$OBJ"); acknowledged so far: $(acked_count)"
	fi
	((el < 30000)) || fail "no new leader within 30s of the kill"
	sleep 0.1
done
ok "+$(secs "$FAILOVER_MS")s  new leader: broker $NEW (leader epoch $OLD_EPOCH -> $(epoch_of "$OBJ")), ISR $(isr_of "$OBJ"): failover took $(secs "$FAILOVER_MS")s"
echo
say "After the failover:"
ctl describe-cluster

# ---------------------------------------------------------------- 5
step "Check that every acknowledged record survived" \
	"Wait for the producer to finish on the new leader, then read the whole partition from it and" \
	"compare: each acknowledged record must be at the offset it was acknowledged at, in order."
producer_done() { ! running "$PRODUCER_PID"; }
wait_for 120 "the producer did not finish" producer_done
prc=0
wait "$PRODUCER_PID" || prc=$?
PRODUCER_PID=
[ "$prc" = 0 ] || fail "the producer failed (status $prc; see $LOGS/producer.log)"
retried=$(grep -c ' failed ' "$LOGS/producer.log" || true)
# Longest wait between two acknowledgements: how long the failover stalled the producer.
gap=$(awk '$2 == "ok" { if (n++ && $1 - prev > max) max = $1 - prev; prev = $1 } END { print max + 0 }' "$LOGS/producer.log")
ok "producer done: $(acked_count) records acknowledged; the longest wait for an acknowledgement was $(secs "$gap")s"
if ((retried > 0)); then say "($retried batch(es) failed after ctlclient's own retries and were sent again)"; fi
LAST_OFF=$(tail -n 1 "$ACKED" | cut -f 1)
show "./bin/ctlclient --controller $CONTROLLER consume --topic $TOPIC --partition 0 --offset 0 > $CONSUMED"
consumed_all() {
	"$BIN/ctlclient" --controller "$CONTROLLER" consume --topic "$TOPIC" --partition 0 --offset 0 >"$CONSUMED" 2>>"$LOGS/consume.log" || return 1
	# Below the HW only: a new leader's HW may trail for a moment.
	[ "$(tail -n 1 "$CONSUMED" | cut -f 1)" -ge "$LAST_OFF" ] 2>/dev/null
}
wait_for 30 "could not read up to offset $LAST_OFF" consumed_all
say "$(wc -l <"$CONSUMED" | tr -d ' ') records read, offsets $(head -n 1 "$CONSUMED" | cut -f 1)..$(tail -n 1 "$CONSUMED" | cut -f 1); first and last:"
head -n 2 "$CONSUMED" | sed 's/^/        /'
say "        ..."
tail -n 2 "$CONSUMED" | sed 's/^/        /'
if ! verdict=$(awk -F '\t' '
	FILENAME == ARGV[1] { got[$1] = $2; next }
	{
		n++
		if (!($1 in got)) { if (++missing <= 5) print "  missing: offset " $1 " (" $2 ")" }
		else if (got[$1] != $2) { if (++wrong <= 5) print "  offset " $1 ": acknowledged " $2 ", found " got[$1] }
		if (n > 1 && $1 + 0 <= prev) { if (++order <= 5) print "  out of order: offset " $1 " after " prev }
		prev = $1 + 0
	}
	END {
		if (missing + wrong + order > 0) { print n " acknowledged records: " missing + 0 " missing, " wrong + 0 " different, " order + 0 " out of order"; exit 1 }
		print n " acknowledged records, all present, in order"
	}' "$CONSUMED" "$ACKED"); then
	printf '%s\n' "$verdict" >&2
	fail "acknowledged records were lost (compare $ACKED with $CONSUMED)"
fi
ok "$verdict ($ACKED_AT_KILL of them acknowledged by broker $OLD before it was killed)"
extra=$(($(wc -l <"$CONSUMED") - $(acked_count)))
if ((extra > 0)); then
	say "(the log also holds $extra records that were never acknowledged: a batch whose answer was lost"
	say " with the old leader is sent again, so it can be there twice: delivery is at least once)"
fi

# ---------------------------------------------------------------- 6
step "Restart broker $OLD" \
	"It registers again with a new broker epoch, truncates whatever the new leader does not have" \
	"(by leader epoch), catches up by fetching, and leader $NEW asks the controller (AlterPartition)" \
	"to put it back into the ISR."
show "$(broker_cmd "$OLD") &"
RESTART_T=$(now_ms)
start_broker "$OLD"
rejoined() {
	running "${BROKER_PID[$OLD]}" || { tail -n 20 "$LOGS/broker-$OLD.log" >&2; fail "broker $OLD exited"; }
	in_list "$OLD" "$(isr_of "$(partition_obj "$(cluster_json)")")"
}
wait_for 60 "broker $OLD did not rejoin the ISR" rejoined
ok "broker $OLD is back in the ISR, $(secs $(($(now_ms) - RESTART_T)))s after its start"
echo
ctl describe-cluster
echo
show "./bin/ctlclient --broker $(addr_of "$OLD") describe --topic $TOPIC    # broker $OLD's own view: a follower, caught up"
"$BIN/ctlclient" --broker "$(addr_of "$OLD")" describe --topic "$TOPIC"

DEMO_MS=$(($(now_ms) - DEMO_START))
printf '\n%sDemo steps done in %ss.%s\n' "$G" "$(secs "$DEMO_MS")" "$N"

# ---------------------------------------------------------------- 7
if [ -n "$NONINTERACTIVE" ]; then
	step "Stop the cluster (non-interactive run)"
	STOP_STEP=1
	exit 0
fi
step "Leave the cluster running"
grpcurl="./bin/grpcurl -plaintext $CONTROLLER list replicad.v1.ControllerService"
refused= TLS_ENV=
if [ -z "$PLAINTEXT" ]; then
	TLS_ENV=" CTLCLIENT_TLS_CERT=$CERTS/admin.crt CTLCLIENT_TLS_KEY=$CERTS/admin.key CTLCLIENT_TLS_CA=$CERTS/ca.crt"
	grpcurl="./bin/grpcurl -cacert $CERTS/ca.crt -cert $CERTS/admin.crt -key $CERTS/admin.key $CONTROLLER list replicad.v1.ControllerService"
	refused="CTLCLIENT_TLS_CERT=$CERTS/client.crt CTLCLIENT_TLS_KEY=$CERTS/client.key ./bin/ctlclient delete-topic --topic $TOPIC   # refused: PermissionDenied"
fi
[ -x "$BIN/grpcurl" ] || grpcurl="$grpcurl   # after 'make tools' builds bin/grpcurl"
cat <<TRY

${B}The cluster is running.${N} Try, in another terminal:
  export CTLCLIENT_CONTROLLER=$CONTROLLER${TLS_ENV}
  ./bin/ctlclient describe-cluster
  ./bin/ctlclient consume --topic $TOPIC --partition 0 --offset $((LAST_OFF - 2)) --follow    # follows leader changes
  seq 1 100 | ./bin/ctlclient produce --topic $TOPIC --partition 0 --acks all
  ./bin/ctlclient elect --topic $TOPIC --partition 0 --leader $OLD                        # move the leadership by hand
  ./bin/ctlclient create-topic --topic orders --partitions 3 --replication-factor 2
  ./bin/ctlclient reassign --topic orders --partition 0 --replicas 3,1                 # shows its progress
  kill -STOP \$(cat $PIDS/broker-$NEW); sleep 5; kill -CONT \$(cat $PIDS/broker-$NEW)   # freeze broker $NEW past the session timeout: fenced, then back
  $grpcurl
  $refused
Logs: $LOGS/*.log (tail -f $LOGS/controller.log). Ctrl-C stops everything (controlled shutdown).
TRY
# Until Ctrl-C (the INT trap ends the script and cleanup stops the cluster), or
# until the controller dies.
WAITING=1
wait "$CONTROLLER_PID" || true
WAITING=
CONTROLLER_PID=
fail "the controller exited (see $LOGS/controller.log)"
