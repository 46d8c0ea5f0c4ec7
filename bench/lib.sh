# lib.sh: what cluster.sh and redis-cpu.sh share, sourced by each once it
# has defined say (its messages to stderr), here (the bench folder) and root: a
# temporary directory, work, removed at exit unless KEEP=1; the processes
# started, pids, all stopped at exit, on a signal too; free loopback ports;
# building the tools; starting redis-server and the load; and the count of
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

# build_tools puts sluice ($SLUICE if set, else built from the repository)
# and bench/clusterload into $work; it exits 1 if either does not build.
build_tools() {
	say "building sluice and clusterload"
	if [ -n "${SLUICE:-}" ]; then
		cp "$SLUICE" "$work/sluice"
	else
		(cd "$root" && go build -o "$work/sluice" ./cmd/sluice) || exit 1
	fi
	(cd "$here" && go build -o "$work/clusterload" ./clusterload) || exit 1
}

# describe_machine sets commit, machine and clk_tck: the table header's
# words and what clusterload divides /proc/PID/stat's ticks by.
describe_machine() {
	local cpu_model
	commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
	cpu_model=$(awk -F'\t*: ' '$1 == "model name" {print $2; exit}' /proc/cpuinfo 2>/dev/null)
	machine="$(nproc) CPUs (${cpu_model:-unknown CPU}), kernel $(uname -r)"
	clk_tck=$(getconf CLK_TCK)
}

# print_started prints the line that opens a table: when, which commit,
# the machine, the Go version and the load average.
print_started() {
	printf '_%s UTC · commit %s · %s · %s · load average %s at the start._\n\n' \
		"$(date -u '+%Y-%m-%d %H:%M')" "$commit" "$machine" "$(go version | cut -d' ' -f3)" "$(load)"
}

# start_redis PORT DIR [ARG...] starts a redis-server on 127.0.0.1:PORT
# without persistence, its files and log in DIR and the ARGs added, adds
# it to pids, sets redis_pid to it and waits (about 5 s at most) for it to
# answer PING; it returns 1, with the log's tail, if it does not.
start_redis() {
	local port=$1 dir=$2
	shift 2
	mkdir -p "$dir"
	redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save "" --appendonly no "$@" \
		>"$dir/log" 2>&1 &
	redis_pid=$!
	pids+=("$redis_pid")
	for _ in $(seq 100); do
		redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0
		sleep 0.05
	done
	say "redis-server on port $port did not start:"
	tail -5 "$dir/log" >&2
	return 1
}

# joined prints its arguments separated by commas.
joined() {
	local IFS=,
	echo "$*"
}

# run_load OUT ARG... runs clusterload with the ARGs, its standard output
# into OUT.out and its errors into OUT.err, and sets rc to its exit status.
# It runs in the background, so that a signal to the script is acted on at
# once (bash runs a trap only between foreground commands).
run_load() {
	local out=$1 lpid
	shift
	"$work/clusterload" "$@" >"$out.out" 2>"$out.err" &
	lpid=$!
	pids+=("$lpid")
	wait "$lpid"
	rc=$?
	forget "$lpid"
}
