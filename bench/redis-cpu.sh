#!/usr/bin/env bash
# redis-cpu.sh: Redis CPU per decision, Sluice beside envoyproxy/ratelimit,
# in one run. It starts one redis-server (not a Cluster) and, for each rule
# (RULES) and each target (TARGETS), PROCS server processes on it with that
# rule, drives the same Zipf load at them over the RLS gRPC API with
# bench/clusterload, and prints one row: redis-server's CPU per decision
# (utime + stime from /proc/PID/stat over the timed interval), the servers'
# CPU per decision, Redis commands per decision, and the admitted count
# against the limit. Redis is emptied (FLUSHALL) before each row. Every
# process it starts is stopped when it exits, on a signal too, and its
# directory removed.
#
# Usage, from anywhere in the repository:
#
#	bench/redis-cpu.sh
#	ROUNDS=1 RULES="second:100" TARGETS="envoy sluice-default" bench/redis-cpu.sh
#
# Knobs, with their defaults:
#
#	RULES="second:100 second:10000 minute:100 minute:10000"
#	                  UNIT:LIMIT, one rule on the descriptor key user per
#	                  row (the same YAML for both servers)
#	TARGETS="envoy envoy-cache sluice-default sluice-coalesce sluice-cache sluice-leases sluice-off"
#	                  envoy: envoyproxy/ratelimit, its defaults (a pool of
#	                  10 connections, no pipelining window, no local cache);
#	                  envoy-cache: the same with LOCAL_CACHE_SIZE_IN_BYTES
#	                  (its over-limit cache); sluice-default: sluice serve's
#	                  defaults (over-limit cache, coalescing, leases);
#	                  sluice-coalesce, sluice-cache, sluice-leases: that
#	                  relief alone; sluice-off: none of them
#	ROUNDS=2          passes over every rule and target (rows interleaved)
#	PROCS=1           server processes per row
#	CONC=64           concurrent calls per process (one gRPC connection)
#	KEYS=10000        descriptor values user=000000 …
#	ZIPF_S=1.1        Zipf exponent
#	WARMUP=2s         load before the timed interval (counted in admitted)
#	DURATION=6s       the timed interval
#	SLUICE=           a sluice binary to use instead of building one
#	ENVOY_RATELIMIT=  envoyproxy/ratelimit's binary; default: built into
#	                  $BENCH_CACHE as bench/bench-all.sh builds it (the
#	                  version of bench/rls_envoy_test.go)
#	KEEP=             1: keep the work directory (logs)
#
# The columns: Redis CPU, µs of redis-server CPU per decision; server CPU,
# µs per decision summed over the server processes; Redis ops, store
# operations per decision (Sluice's EVALSHA, envoyproxy/ratelimit's INCRBY,
# whose EXPIRE goes in the same pipeline); scripts, EVALSHA per decision; decisions/s and refused
# over the timed interval; admitted, ideal, over and under over the whole
# run as bench/clusterload counts them (ideal: Σ min(sent, limit) per value
# and epoch-aligned window); fallback, the decisions sluice serve's failure
# policy answered without Redis (sluice_rls_store_errors_total; – for
# envoyproxy/ratelimit, which has no such count). The machine's load
# average is given before and after each row.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
RULES=${RULES:-"second:100 second:10000 minute:100 minute:10000"}
TARGETS=${TARGETS:-"envoy envoy-cache sluice-default sluice-coalesce sluice-cache sluice-leases sluice-off"}
ROUNDS=${ROUNDS:-2}
PROCS=${PROCS:-1}
CONC=${CONC:-64}
KEYS=${KEYS:-10000}
ZIPF_S=${ZIPF_S:-1.1}
WARMUP=${WARMUP:-2s}
DURATION=${DURATION:-6s}
BENCH_CACHE=${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice-bench}

say() { echo "redis-cpu.sh: $*" >&2; }
# work, pids, stop_pids, free_port, build_tools, start_redis, run_load,
# store_errors: see lib.sh.
. "$here/lib.sh"
need redis-server redis-cli go curl

# serve_flags prints sluice serve's flags for a sluice target.
serve_flags() {
	case $1 in
	sluice-default) ;;
	sluice-coalesce) echo "-local-cache=false -lease-share 0" ;;
	sluice-cache) echo "-redis-coalesce-wait 0 -lease-share 0" ;;
	sluice-leases) echo "-local-cache=false -redis-coalesce-wait 0" ;;
	sluice-off) echo "-local-cache=false -redis-coalesce-wait 0 -lease-share 0" ;;
	*) return 1 ;;
	esac
}
for t in $TARGETS; do
	case $t in
	envoy | envoy-cache) ;;
	*) serve_flags "$t" >/dev/null || {
		say "unknown target $t"
		exit 2
	} ;;
	esac
done
for r in $RULES; do
	case $r in
	second:[0-9]* | minute:[0-9]* | hour:[0-9]*) ;;
	*)
		say "rule $r: want UNIT:LIMIT, UNIT second, minute or hour"
		exit 2
		;;
	esac
done

build_tools

# envoyproxy/ratelimit, built once as bench-all.sh builds it.
envoy_bin=
case " $TARGETS " in
*" envoy "* | *" envoy-cache "*)
	envoy_const() { sed -n "s/^[[:space:]]*$1 *= \"\(.*\)\"\$/\1/p" "$here/rls_envoy_test.go"; }
	module=$(envoy_const envoyRatelimitModule)
	version=$(envoy_const envoyRatelimitVersion)
	if [ -n "${ENVOY_RATELIMIT:-}" ]; then
		envoy_bin=$ENVOY_RATELIMIT
	else
		dir=$BENCH_CACHE/envoy-ratelimit-$version
		if [ ! -x "$dir/service_cmd" ]; then
			say "building envoyproxy/ratelimit $version into $dir"
			mkdir -p "$dir" && (cd "$work" && GOBIN=$dir go install "$module@$version") >&2 || {
				say "envoyproxy/ratelimit did not build: its rows are left out"
			}
		fi
		[ -x "$dir/service_cmd" ] && envoy_bin=$dir/service_cmd
	fi
	;;
esac

describe_machine
free_port redis_port
start_redis "$redis_port" "$work/redis" || exit 1

# rules_dir UNIT LIMIT writes the rule for both servers and prints its
# directory: envoyproxy/ratelimit reads DIR/ratelimit/config/*.yaml
# (RUNTIME_ROOT=DIR), sluice serve the same file.
rules_dir() {
	local dir=$work/rules-$1-$2
	mkdir -p "$dir/ratelimit/config"
	cat >"$dir/ratelimit/config/bench.yaml" <<EOF
domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: $1
      requests_per_unit: $2
EOF
	echo "$dir"
}

# start_server TARGET RULESDIR LOG starts one server process of TARGET on
# fresh ports, appends its PID to spids, its gRPC address to addrs and its
# HTTP address to https.
start_server() {
	local t=$1 dir=$2 log=$3 g h d
	free_port g
	free_port h
	free_port d
	case $t in
	envoy | envoy-cache)
		local cache=0
		[ "$t" = envoy-cache ] && cache=1048576
		(cd "$dir" && exec env -i PATH="$PATH" HOME="$HOME" \
			RUNTIME_ROOT="$dir" RUNTIME_SUBDIRECTORY=ratelimit RUNTIME_WATCH_ROOT=false \
			REDIS_SOCKET_TYPE=tcp REDIS_URL="127.0.0.1:$redis_port" USE_STATSD=false LOG_LEVEL=warn \
			LOCAL_CACHE_SIZE_IN_BYTES=$cache \
			GRPC_HOST=127.0.0.1 GRPC_PORT="$g" HOST=127.0.0.1 PORT="$h" DEBUG_HOST=127.0.0.1 DEBUG_PORT="$d" \
			"$envoy_bin") >"$log" 2>&1 &
		;;
	*)
		# shellcheck disable=SC2046 # serve_flags prints a list of flags
		env -i PATH="$PATH" HOME="$HOME" "$work/sluice" serve -config "$dir/ratelimit/config/bench.yaml" \
			-store "redis://127.0.0.1:$redis_port" -grpc-addr "127.0.0.1:$g" -http-addr "127.0.0.1:$h" \
			-log-level warn -watch=false $(serve_flags "$t") >"$log" 2>&1 &
		;;
	esac
	pids+=($!)
	spids+=($!)
	addrs+=("127.0.0.1:$g")
	https+=("127.0.0.1:$h")
}

# row ROUND UNIT LIMIT TARGET runs PROCS servers of TARGET with the rule
# and prints the table's row.
row() {
	local round=$1 unit=$2 limit=$3 t=$4 dir i spids=() addrs=() https=() load0 rc line period=1s fallback=–
	case $unit in
	minute) period=1m ;;
	hour) period=1h ;;
	esac
	if [ "${t%%-*}" = envoy ] && [ -z "$envoy_bin" ]; then
		printf '| %s | %s/%s | %s | not measured: envoyproxy/ratelimit did not build |||||||||||\n' "$round" "$limit" "$unit" "$t"
		return
	fi
	redis-cli -p "$redis_port" FLUSHALL >/dev/null
	redis-cli -p "$redis_port" CONFIG RESETSTAT >/dev/null
	dir=$(rules_dir "$unit" "$limit")
	for i in $(seq "$PROCS"); do
		start_server "$t" "$dir" "$work/serve-$round-$unit-$limit-$t-$i.log"
	done
	load0=$(load)
	local out=$work/load-$round-$unit-$limit-$t
	run_load "$out" -targets "$(joined "${addrs[@]}")" -sluice-pids "$(joined "${spids[@]}")" \
		-redis-pids "$redis_pid" -redis-addrs "127.0.0.1:$redis_port" -clk-tck "$clk_tck" \
		-conc "$CONC" -keys "$KEYS" -zipf-s "$ZIPF_S" -limit "$limit" -limit-period "$period" \
		-warmup "$WARMUP" -duration "$DURATION"
	[ "${t%%-*}" = sluice ] && fallback=$(store_errors "${https[@]}")
	stop_pids "${spids[@]}"
	if [ "$rc" != 0 ]; then
		say "$t $limit/$unit: clusterload failed: $(tail -3 "$out.err")"
		for i in $(seq "$PROCS"); do tail -3 "$work/serve-$round-$unit-$limit-$t-$i.log" >&2; done
		printf '| %s | %s/%s | %s | failed (exit status %s) |||||||||||\n' "$round" "$limit" "$unit" "$t" "$rc"
		return
	fi
	line=$(cat "$out.out")
	echo "$round $unit $limit $t $line" >>"$work/raw.txt"
	echo "$line" | awk -v r="$round" -v rule="$limit/$unit" -v t="$t" -v fb="$fallback" -v l0="$load0" -v l1="$(load)" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		printf "| %s | %s | %s | %.2f | %.1f | %.3f | %.3f | %.0f | %.1f%% | %d | %d | %d | %d | %s | %s → %s |\n",
			r, rule, t, f["redis_cpu_us"], f["sluice_cpu_us"], f["redis_ops"], f["redis_calls"],
			f["dps"], 100 * f["refused"] / f["decisions"], f["admitted"], f["ideal"], f["over"], f["under"], fb, l0, l1
	}'
}

print_started
printf '`bench/redis-cpu.sh` with RULES="%s" TARGETS="%s" ROUNDS=%s PROCS=%s CONC=%s KEYS=%s ZIPF_S=%s WARMUP=%s DURATION=%s.\n\n' \
	"$RULES" "$TARGETS" "$ROUNDS" "$PROCS" "$CONC" "$KEYS" "$ZIPF_S" "$WARMUP" "$DURATION"
echo '| round | rule | target | Redis CPU µs | server CPU µs | Redis ops | scripts | decisions/s | refused | admitted | ideal | over | under | fallback | load before → after |'
echo '|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|'
for round in $(seq "$ROUNDS"); do
	for r in $RULES; do
		for t in $TARGETS; do
			row "$round" "${r%%:*}" "${r#*:}" "$t"
		done
	done
done
