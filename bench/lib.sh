# lib.sh: what cluster.sh and redis-cpu.sh share, sourced by each once it
# has defined say (its messages to stderr): a temporary directory, work,
# removed at exit unless KEEP=1; the processes started, pids, all stopped
# at exit, on a signal too; free loopback ports; and the count of
# decisions sluice serve's failure policy answered. Not run on its own.

load() { cut -d' ' -f1-3 /proc/loadavg; }

# need BIN... exits 1, naming the first BIN not in PATH.
need() {
	local bin
	for bin in "$@"; do
		if ! command -v "$bin" >/dev/null 2>&1; then
			say "$bin not found in PATH (Debian: apt-get install redis-server redis-tools curl)"
			exit 1
		fi
	done
}

work=$(mktemp -d)
pids=() # every process started and not yet stopped, stopped at exit
# stop_pids stops the processes (this script's children), waits for them
# (SIGKILL after about 10 s) and forgets them, so that no exited process's ID is signalled later.
stop_pids() {
	local p= i
	for p in "$@"; do
		kill "$p" 2>/dev/null || true
	done
	# A process that ignores SIGTERM gets SIGKILL after about 10 s, so
	# that the exit trap never hangs on it.
	for i in $(seq 100); do
		for p in "$@"; do
			kill -0 "$p" 2>/dev/null && break
			p=
		done
		[ -z "$p" ] && break
		sleep 0.1
	done
	for p in "$@"; do
		kill -KILL "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	forget "$@"
}
# forget drops processes already waited for from pids, without a signal.
forget() {
	local p q keep=()
	for q in "${pids[@]}"; do
		for p in "$@"; do
			[ "$q" = "$p" ] && continue 2
		done
		keep+=("$q")
	done
	pids=("${keep[@]}")
}
cleanup() {
	stop_pids "${pids[@]}"
	if [ "${KEEP:-}" = 1 ]; then
		say "kept $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# free_port VAR [bus] sets VAR to a loopback port nothing listens on, from a
# range below the ephemeral one (not in a subshell: it moves next_port on);
# with "bus", its cluster bus port (+10000) is free too.
next_port=$((20000 + ($$ * 13) % 9000))
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
	while :; do
		next_port=$((next_port + 1))
		[ "$next_port" -lt 29999 ] || next_port=20000
		listening "$next_port" && continue
		[ "${2:-}" = bus ] && listening $((next_port + 10000)) && continue
		printf -v "$1" '%s' "$next_port"
		return
	done
}

# store_errors prints the sum of sluice_rls_store_errors_total of the
# sluice serve processes whose HTTP addresses are the arguments: the
# decisions their failure policy answered without Redis.
store_errors() {
	local a
	for a in "$@"; do
		curl -s --max-time 10 "http://$a/metrics"
	done | awk '/^sluice_rls_store_errors_total/ {s += $NF} END {printf "%d", s}'
}
