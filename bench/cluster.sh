#!/usr/bin/env bash
# cluster.sh: Sluice as a fleet on one machine. For each number of shards M
# (SHARDS) it starts an M-shard Redis Cluster (redis-server processes in a
# temporary directory; `redis-cli --cluster create` for 3 shards or more,
# CLUSTER ADDSLOTSRANGE and CLUSTER MEET below 3, which redis-cli refuses),
# and for each number of processes N (PROCS) it starts N `sluice serve`
# processes (built once) on that cluster with one rule, drives Zipf load at
# them over the RLS gRPC API with bench/clusterload, and prints one row:
# aggregate decisions/s, Sluice's and redis-server's CPU per decision (every
# process's utime + stime from /proc/PID/stat, before and after the timed
# interval), Redis script calls per decision, and the admitted count against
# the limit. Every process it starts is stopped when it exits, on a signal
# too, and its directory removed.
#
# Usage, from anywhere in the repository:
#
#	bench/cluster.sh                      # 1 and 3 shards × 1, 2 and 4 processes
#	SHARDS=3 PROCS=4 DURATION=20s bench/cluster.sh
#
# Knobs, with their defaults:
#
#	SHARDS="1 3"      Redis Cluster sizes (masters, no replicas); "single" is
#	                  one redis-server that is not a Cluster (redis://)
#	PROCS="1 2 4"     sluice serve processes per row
#	CONC=32           concurrent calls per sluice serve process (one gRPC
#	                  connection each, as one Envoy worker keeps)
#	KEYS=10000        descriptor values user=000000 …
#	ZIPF_S=1.1        Zipf exponent: value i drawn with weight 1/(1+i)^s
#	LIMIT=100         the rule: LIMIT per second (fixed window), per value
#	WARMUP=2s         load before the timed interval (counted in admitted)
#	DURATION=8s       the timed interval
#	SERVE_FLAGS=      more flags for sluice serve (such as -local-cache=false,
#	                  -redis-coalesce-wait 0); default: its defaults
#	SLUICE=           a sluice binary to use instead of building one
#	KEEP=             1: keep the work directory (logs)
#
# The table's columns: decisions/s over the timed interval (all processes);
# refused, the share answered OVER_LIMIT; Sluice CPU and Redis CPU, µs per
# decision summed over the processes; Redis calls, script calls (EVALSHA)
# per decision summed over the shards, and Redis µs per call; client CPU,
# the load generator's; fallback, decisions sluice serve's failure policy
# answered without Redis (sluice_rls_store_errors_total); admitted and
# ideal over the whole run (warm-up included): ideal is Σ min(sent, LIMIT)
# per value and window, over and under what was admitted past the limit
# and short of the ideal (see bench/clusterload). The machine's load
# average is given before and after each row: every process shares its
# cores, the load generator's too, so the CPU per decision is the figure to
# read and decisions/s an indication.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
SHARDS=${SHARDS:-"1 3"}
PROCS=${PROCS:-"1 2 4"}
CONC=${CONC:-32}
KEYS=${KEYS:-10000}
ZIPF_S=${ZIPF_S:-1.1}
LIMIT=${LIMIT:-100}
WARMUP=${WARMUP:-2s}
DURATION=${DURATION:-8s}
SERVE_FLAGS=${SERVE_FLAGS:-}

say() { echo "cluster.sh: $*" >&2; }
# work, pids, stop_pids, free_port, build_tools, start_redis, run_load,
# store_errors: see lib.sh.
. "$here/lib.sh"
need redis-server redis-cli go curl
build_tools

cat >"$work/rules.yaml" <<EOF
domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: $LIMIT
EOF

describe_machine
redis_pids=() redis_ports=()

# start_cluster M starts M cluster-enabled redis-servers and makes them one
# cluster with every slot served; M "single" starts one redis-server that is
# not a Cluster.
start_cluster() {
	local m=$1 i p cluster=(--cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000)
	redis_pids=() redis_ports=()
	[ "$m" = single ] && cluster=()
	for i in $(seq "${m/single/1}"); do
		free_port p bus
		start_redis "$p" "$work/redis-$m-$i" "${cluster[@]}" || return 1
		redis_pids+=("$redis_pid")
		redis_ports+=("$p")
	done
	if [ "$m" = single ]; then
		return 0
	elif [ "$m" -ge 3 ]; then
		local addrs=()
		for p in "${redis_ports[@]}"; do addrs+=("127.0.0.1:$p"); done
		redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$work/create-$m.log" 2>&1 || {
			say "redis-cli --cluster create failed:"
			tail -5 "$work/create-$m.log" >&2
			return 1
		}
	else
		# redis-cli --cluster create wants 3 masters at least: give each
		# node its share of the slots, then introduce them.
		local lo=0 hi n=0
		for p in "${redis_ports[@]}"; do
			n=$((n + 1))
			hi=$((16384 * n / m - 1))
			redis-cli -p "$p" CLUSTER ADDSLOTSRANGE "$lo" "$hi" >/dev/null
			lo=$((hi + 1))
			[ "$p" = "${redis_ports[0]}" ] || redis-cli -p "$p" CLUSTER MEET 127.0.0.1 "${redis_ports[0]}" >/dev/null
		done
	fi
	# Every node sees the whole cluster: every slot served, every node known.
	for _ in $(seq 200); do
		local ok=1
		for p in "${redis_ports[@]}"; do
			local info
			info=$(redis-cli -p "$p" CLUSTER INFO 2>/dev/null | tr -d '\r')
			echo "$info" | grep -q '^cluster_state:ok$' || ok=0
			echo "$info" | grep -q '^cluster_slots_ok:16384$' || ok=0
			echo "$info" | grep -q "^cluster_known_nodes:$m\$" || ok=0
		done
		[ "$ok" = 1 ] && return 0
		sleep 0.1
	done
	say "the $m-shard cluster did not reach cluster_state:ok"
	return 1
}

stop_cluster() {
	stop_pids "${redis_pids[@]}"
	redis_pids=()
}

# row M N runs N sluice serve processes on the current M-shard cluster
# and prints the table's row.
row() {
	local m=$1 n=$2 i g h addrs=() https=() spids=() url="redis+cluster://" p sep=""
	[ "$m" = single ] && url="redis://"
	for p in "${redis_ports[@]}"; do
		redis-cli -p "$p" FLUSHALL >/dev/null
		url="$url${sep}127.0.0.1:$p"
		sep=,
	done
	for i in $(seq "$n"); do
		free_port g
		free_port h
		g=127.0.0.1:$g h=127.0.0.1:$h
		# shellcheck disable=SC2086 # SERVE_FLAGS is a list of flags
		env -i PATH="$PATH" HOME="$HOME" "$work/sluice" serve -config "$work/rules.yaml" -store "$url" \
			-grpc-addr "$g" -http-addr "$h" -log-level warn -watch=false $SERVE_FLAGS \
			>"$work/serve-$m-$n-$i.log" 2>&1 &
		pids+=($!)
		spids+=($!)
		addrs+=("$g")
		https+=("$h")
	done
	local raddrs load0 line rc
	raddrs=$(printf '127.0.0.1:%s,' "${redis_ports[@]}")
	load0=$(load)
	run_load "$work/load-$m-$n" -targets "$(joined "${addrs[@]}")" -sluice-pids "$(joined "${spids[@]}")" \
		-redis-pids "$(joined "${redis_pids[@]}")" -redis-addrs "${raddrs%,}" -clk-tck "$clk_tck" \
		-conc "$CONC" -keys "$KEYS" -zipf-s "$ZIPF_S" -limit "$LIMIT" -warmup "$WARMUP" -duration "$DURATION"
	line=$(cat "$work/load-$m-$n.out")
	local fallback
	fallback=$(store_errors "${https[@]}")
	stop_pids "${spids[@]}"
	if [ "$rc" != 0 ]; then
		say "shards=$m processes=$n: clusterload failed: $(tail -3 "$work/load-$m-$n.err")"
		for i in $(seq "$n"); do tail -3 "$work/serve-$m-$n-$i.log" >&2; done
		printf '| %s | %s | failed (exit status %s) |||||||||||\n' "$m" "$n" "$rc"
		return
	fi
	echo "$line" >>"$work/raw.txt"
	echo "$line" | awk -v m="$m" -v n="$n" -v fb="$fallback" -v l0="$load0" -v l1="$(load)" '{
		for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		per_call = f["redis_calls"] > 0 ? f["redis_cpu_us"] / f["redis_calls"] : 0
		printf "| %s | %d | %.0f | %.1f%% | %.1f | %.1f | %.3f | %.1f | %.1f | %d | %d | %d | %d | %d | %s → %s |\n",
			m, n, f["dps"], 100 * f["refused"] / f["decisions"], f["sluice_cpu_us"], f["redis_cpu_us"],
			f["redis_calls"], per_call, f["cli_cpu_us"], fb, f["admitted"], f["ideal"], f["over"], f["under"], l0, l1
	}'
}

print_started
printf '`bench/cluster.sh` with SHARDS="%s" PROCS="%s" CONC=%s KEYS=%s ZIPF_S=%s LIMIT=%s WARMUP=%s DURATION=%s%s.\n\n' \
	"$SHARDS" "$PROCS" "$CONC" "$KEYS" "$ZIPF_S" "$LIMIT" "$WARMUP" "$DURATION" "${SERVE_FLAGS:+ SERVE_FLAGS=\"$SERVE_FLAGS\"}"
echo '| shards | processes | decisions/s | refused | Sluice CPU µs | Redis CPU µs | Redis calls | Redis µs/call | client CPU µs | fallback | admitted | ideal | over | under | load before → after |'
echo '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|'
for m in $SHARDS; do
	start_cluster "$m" || exit 1
	for n in $PROCS; do
		row "$m" "$n"
	done
	stop_cluster
done
