#!/bin/sh
# redis-ceiling.sh: the ceiling for the Redis client benchmarks
# (BenchmarkRedisClient in redis_test.go). redis-benchmark, a C client with
# no per-request work of its own, runs the same GCRA script
# (testdata/gcra.lua) with EVALSHA against a redis-server this script starts
# on a loopback port and stops when it exits, on the same keys and with the
# same arguments as the Go benchmark: every key is first given a cost of 5e8
# (its TAT 500 s ahead), then each timed call costs 1 at 1e6/s with a burst
# of 1e9, so every decision is an admission on an existing key.
#
# Usage: ./redis-ceiling.sh [repetitions]   (default 3)
#
# Each repetition prints one CSV row per case:
#   case,clients,pipeline,requests,rps,p50_ms,p99_ms
# where case is keys=10000 (__rand_int__ with -r 10000) or keys=1 (one hot
# key). pipeline=16 is the ceiling; pipeline=1 (one request in flight per
# connection) is shown for comparison. The last line is the server's
# INFO commandstats for EVALSHA over all the runs.
set -eu

reps=${1:-3}
clients=64
requests=200000

cd "$(dirname "$0")"
for bin in redis-server redis-cli redis-benchmark; do
	if ! command -v "$bin" >/dev/null 2>&1; then
		echo "redis-ceiling.sh: $bin not found in PATH (Debian: apt-get install redis-server redis-tools)" >&2
		exit 1
	fi
done

pid=
stop() {
	if [ -n "$pid" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		pid=
	fi
}
trap stop EXIT
trap 'stop; exit 130' INT TERM

# Start redis-server on a free port: try ports below the ephemeral range
# until one binds and answers PING.
port=
try=0
while [ "$try" -lt 20 ]; do
	p=$((20000 + ($$ * 31 + try * 997) % 10000))
	try=$((try + 1))
	if redis-cli -p "$p" ping >/dev/null 2>&1; then
		continue # something already answers there
	fi
	redis-server --port "$p" --bind 127.0.0.1 --save "" --appendonly no >/dev/null 2>&1 &
	pid=$!
	i=0
	while [ "$i" -lt 100 ] && kill -0 "$pid" 2>/dev/null; do
		if redis-cli -p "$p" ping 2>/dev/null | grep -q PONG; then
			port=$p
			break 2
		fi
		sleep 0.05
		i=$((i + 1))
	done
	stop
done
if [ -z "$port" ]; then
	echo "redis-ceiling.sh: could not start redis-server on a free port" >&2
	exit 1
fi

sha=$(redis-cli -p "$port" SCRIPT LOAD "$(cat testdata/gcra.lua)")

# Warm every key, as BenchmarkRedisClient does.
awk -v sha="$sha" 'BEGIN {
	printf "EVALSHA %s 1 bench:{hot} 1 1000000000 500000000\n", sha
	for (i = 0; i < 10000; i++)
		printf "EVALSHA %s 1 bench:{%012d} 1 1000000000 500000000\n", sha, i
}' | redis-cli -p "$port" >/dev/null

run() { # case pipeline key [redis-benchmark options]
	c=$1 pl=$2 key=$3
	shift 3
	redis-benchmark -p "$port" -c "$clients" -n "$requests" -P "$pl" "$@" --csv \
		EVALSHA "$sha" 1 "$key" 1 1000000000 1 |
		awk -F'"' -v c="$c" -v cl="$clients" -v pl="$pl" -v n="$requests" \
			'NR == 2 { printf "%s,%s,%s,%s,%s,%s,%s\n", c, cl, pl, n, $4, $10, $14 }'
}

echo "redis-server $(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/') on 127.0.0.1:$port, script $sha"
echo "case,clients,pipeline,requests,rps,p50_ms,p99_ms"
r=0
while [ "$r" -lt "$reps" ]; do
	run keys=10000 16 'bench:{__rand_int__}' -r 10000
	run keys=1 16 'bench:{hot}'
	run keys=10000 1 'bench:{__rand_int__}' -r 10000
	r=$((r + 1))
done
# The server's own time per EVALSHA over all the runs above: 1e6 / usec_per_call
# is what one redis-server thread can decide per second, with no I/O at all.
redis-cli -p "$port" INFO commandstats | grep '^cmdstat_evalsha:' | tr -d '\r'
