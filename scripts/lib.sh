# Helpers shared by the perf and bench scripts (scripts/perf-*.sh,
# scripts/bench-peers.sh): source it before using them.

# wait_for FILE PATTERN: until a process's log says it is up (30 s at most);
# otherwise prints the log's tail and exits 1, naming the calling script.
wait_for() {
	for _ in $(seq 300); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	echo "${0##*/}: no '$2' in $1:" >&2
	tail -20 "$1" >&2
	exit 1
}

# stop_brokers: SIGTERM every pid in the caller's broker_pids array, wait for
# each, and empty the array.
stop_brokers() {
	for p in "${broker_pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${broker_pids[@]}"; do wait "$p" 2>/dev/null || true; done
	broker_pids=()
}
