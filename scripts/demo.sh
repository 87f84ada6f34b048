#!/usr/bin/env bash
# make demo: one replicad broker on local defaults, driven by ctlclient.
#
# Starts broker 1 on 127.0.0.1:9091 with its log dir under ./data/demo, makes it
# leader of orders-0, produces ten records with acks=all, consumes them, asks
# for a HW checkpoint and shows the files on disk. The broker keeps running
# with commands to try; Ctrl-C stops it cleanly (SIGTERM: checkpoint, flush).
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=./bin
LISTEN=${REPLICAD_LISTEN:-127.0.0.1:9091}
DATA=./data/demo
export CTLCLIENT_BROKER=$LISTEN

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

rm -rf "$DATA"
mkdir -p "$DATA"
step "start broker 1 on $LISTEN (log dir $DATA/broker-1)"
"$BIN/replicad" --id 1 --listen "$LISTEN" --log-dirs "$DATA/broker-1" --hw-checkpoint-interval 5s \
	--log-format console 2>"$DATA/broker-1.log" &
broker=$!
stop() {
	if kill -0 "$broker" 2>/dev/null; then
		kill -TERM "$broker"
		wait "$broker" && echo "broker 1 stopped cleanly (exit 0)" || echo "broker 1 exited with $?"
	fi
}
trap stop EXIT INT TERM

# Wait (bounded) until the broker answers.
for i in $(seq 1 100); do
	if "$BIN/ctlclient" describe >/dev/null 2>&1; then break; fi
	if ! kill -0 "$broker" 2>/dev/null; then cat "$DATA/broker-1.log"; exit 1; fi
	if [ "$i" = 100 ]; then echo "broker did not answer within 10s"; exit 1; fi
	sleep 0.1
done

step "make broker 1 the leader of orders-0 (controller epoch 1, leader epoch 1)"
run "$BIN/ctlclient" leader-and-isr --controller-id 0 --controller-epoch 1 --topic orders --partition 0 \
	--leader 1 --leader-epoch 1 --isr 1 --replicas 1 --new

step "produce ten records with acks=all (one per stdin line)"
printf 'order-%s\n' $(seq 1 10) | run "$BIN/ctlclient" produce --topic orders --partition 0 --acks all

step "consume from offset 0 up to the high watermark"
run "$BIN/ctlclient" consume --topic orders --partition 0 --offset 0

step "describe the replica"
run "$BIN/ctlclient" describe

step "checkpoint the high watermarks now, and look at the files"
run "$BIN/ctlclient" checkpoint
run cat "$DATA/broker-1/replication-offset-checkpoint"
run cat "$DATA/broker-1/orders-0/leader-epoch-checkpoint"
run ls -l "$DATA/broker-1" "$DATA/broker-1/orders-0"

step "a stale LeaderAndIsr (same leader epoch) is refused, and ctlclient exits non-zero"
run "$BIN/ctlclient" leader-and-isr --controller-id 0 --controller-epoch 1 --topic orders --partition 0 \
	--leader 1 --leader-epoch 1 --isr 1 --replicas 1 || echo "(exit status $?)"

if [ -n "${DEMO_NO_WAIT:-}" ]; then exit 0; fi
cat <<TRY

The broker keeps running. Try, in another terminal:
  export CTLCLIENT_BROKER=$LISTEN
  ./bin/ctlclient produce --topic orders --partition 0 --value hello
  ./bin/ctlclient consume --topic orders --partition 0 --follow
  ./bin/grpcurl -plaintext $LISTEN list
  ./bin/grpcurl -plaintext -d '{"topic":"orders"}' $LISTEN replicad.v1.ReplicaManagerService/DescribePartitions
Broker log: $DATA/broker-1.log. Ctrl-C stops the broker (it checkpoints and flushes first).
TRY
wait "$broker"
