#!/usr/bin/env bash
# proxy.sh measures `sluice proxy` against NGINX limit_req with wrk: the same
# trivial upstream reached directly, through sluice proxy and through NGINX,
# in one run. See BENCHMARKS.md, "Reverse proxy (sluice proxy vs NGINX
# limit_req)".
#
# Usage, from the repository or from bench/:
#
#	bench/proxy.sh
#
# Needs wrk, nginx, curl, pgrep and ss on PATH, and Go to build sluice (or
# SLUICE=path to a sluice binary built beforehand). Everything listens on
# loopback ports it picks; everything it starts is killed when it exits.
# Environment knobs, with their defaults:
#
#	DURATION=15s   wrk -d for every measured run
#	WARMUP=3s      wrk -d of the unmeasured warm-up before the open runs
#	THREADS=2 CONNS=64   wrk -t and -c of the loaded runs
#	WORKERS=2      worker_processes of both NGINX instances
#	KEEP=1         keep the temporary directory (configs, logs, wrk output)
#
# The upstream is an NGINX server block that answers `return 200 "ok\n"`,
# in an NGINX instance of its own: the cheapest upstream there is (no body
# to read, no allocation, no garbage collector sharing the cores with the
# Go proxy), and the same for all three targets.
#
# Scenarios, one run of each target (direct, sluice, nginx) per scenario:
#
#	open   path /open/: rate=1000000r/s burst=100000 nodelay, one key (the
#	       client address), far above what the machine can serve, so no
#	       request is limited and the numbers are the proxies' overhead;
#	       wrk -t$THREADS -c$CONNS
#	open-c1  the same with wrk -t1 -c1: one request at a time, the latency
#	       of a proxy hop without queueing
#	limited  path /limited/: rate=1000r/s burst=100 nodelay, one key;
#	       wrk -t$THREADS -c$CONNS, and the share of 429s
#
# Each row also gives the CPU time per request, from /proc, of the proxy
# (the sluice process; NGINX's master and workers) and of the upstream, over
# the measured run.
#
# Both proxies use their defaults otherwise, with access logs off; sluice
# proxy uses its memory store. NGINX runs worker_processes 2 (the machine's
# cores, as GOMAXPROCS for sluice) and keeps idle upstream connections
# (keepalive 128), as sluice's transport does.
set -euo pipefail

DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-3s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
WORKERS=${WORKERS:-2}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

for tool in wrk nginx curl pgrep ss; do
	command -v "$tool" >/dev/null || { echo "proxy.sh: $tool is not installed" >&2; exit 1; }
done

dir=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	if [ "${KEEP:-}" = 1 ]; then
		echo "kept $dir" >&2
	else
		rm -rf "$dir"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port sets the variable named $1 to a TCP port below the usual
# ephemeral range (32768 and up) that no socket uses and that was not picked
# before.
picked=" "
free_port() {
	local p
	while :; do
		p=$((10000 + RANDOM % 22000))
		case $picked in *" $p "*) continue ;; esac
		if [ -z "$(ss -Htan "( sport = :$p )")" ]; then
			picked="$picked$p "
			printf -v "$1" %s "$p"
			return
		fi
	done
}

# wait_up waits until url answers 200.
wait_up() {
	local i
	for i in $(seq 100); do
		if [ "$(curl -s -o /dev/null -w '%{http_code}' "$1" || true)" = 200 ]; then
			return 0
		fi
		sleep 0.1
	done
	echo "proxy.sh: $1 did not come up" >&2
	exit 1
}

free_port up_port
free_port sl_port
free_port ng_port

if [ -n "${SLUICE:-}" ]; then
	sluice=$SLUICE
else
	sluice=$dir/sluice
	(cd "$root" && go build -o "$sluice" ./cmd/sluice)
fi

# nginx_conf prints the common head of an NGINX config: every file in $dir/$1.
nginx_conf() {
	local name=$1
	cat <<EOF
worker_processes $WORKERS;
daemon off;
pid $dir/$name/nginx.pid;
error_log $dir/$name/error.log warn;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path $dir/$name/body;
    proxy_temp_path $dir/$name/proxy;
    fastcgi_temp_path $dir/$name/fastcgi;
    uwsgi_temp_path $dir/$name/uwsgi;
    scgi_temp_path $dir/$name/scgi;
    keepalive_requests 1000000;
EOF
}

mkdir -p "$dir/upstream" "$dir/nginx"
{
	nginx_conf upstream
	cat <<EOF
    server {
        listen 127.0.0.1:$up_port;
        location / {
            return 200 "ok\n";
        }
    }
}
EOF
} >"$dir/upstream/nginx.conf"

{
	nginx_conf nginx
	cat <<EOF
    limit_req_zone \$binary_remote_addr zone=open:1m rate=1000000r/s;
    limit_req_zone \$binary_remote_addr zone=limited:1m rate=1000r/s;
    limit_req_status 429;
    upstream backend {
        server 127.0.0.1:$up_port;
        keepalive 128;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$ng_port;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        location /open/ {
            limit_req zone=open burst=100000 nodelay;
            proxy_pass http://backend;
        }
        location /limited/ {
            limit_req zone=limited burst=100 nodelay;
            proxy_pass http://backend;
        }
    }
}
EOF
} >"$dir/nginx/nginx.conf"

cat >"$dir/sluice.yaml" <<EOF
listen: 127.0.0.1:$sl_port
upstream: http://127.0.0.1:$up_port
status: 429
access_log: "off"
limits:
  - {name: open, key: ip, rate: 1000000r/s, burst: 100000, nodelay: true}
  - {name: limited, key: ip, rate: 1000r/s, burst: 100, nodelay: true}
routes:
  - {name: open, match: /open/, limits: [open]}
  - {name: limited, match: /limited/, limits: [limited]}
EOF

nginx -p "$dir/upstream" -c "$dir/upstream/nginx.conf" -e "$dir/upstream/error.log" &
up_pid=$!
pids+=($up_pid)
nginx -p "$dir/nginx" -c "$dir/nginx/nginx.conf" -e "$dir/nginx/error.log" &
ng_pid=$!
pids+=($ng_pid)
"$sluice" proxy -config "$dir/sluice.yaml" -access-log off -admin-addr "" -watch=false -log-level warn >"$dir/sluice.out" 2>&1 &
sl_pid=$!
pids+=($sl_pid)

wait_up "http://127.0.0.1:$up_port/open/"
wait_up "http://127.0.0.1:$ng_port/open/"
wait_up "http://127.0.0.1:$sl_port/open/"

# to_us converts a wrk duration (850.00us, 1.23ms, 2.00s) to microseconds.
to_us() {
	awk -v v="$1" 'BEGIN {
		n = v + 0
		if (v ~ /us$/) u = 1; else if (v ~ /ms$/) u = 1000; else if (v ~ /m$/) u = 60e6; else u = 1e6
		printf "%.0f", n * u
	}'
}

# cpu_ticks prints the CPU time (user + system, in clock ticks) the
# processes $@ and their children (NGINX's workers) have used so far.
cpu_ticks() {
	local p total=0 f
	for p in "$@" $(pgrep -P "$(echo "$@" | tr ' ' ,)" || true); do
		# Fields 14 and 15 of /proc/PID/stat; the name in field 2 has no
		# spaces here.
		f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || continue
		total=$((total + ${f% *} + ${f#* }))
	done
	echo "$total"
}

# cpu_us prints ticks per request in µs.
cpu_us() {
	awk -v t="$1" -v n="$2" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t / hz * 1e6 / n}'
}

# run runs wrk against one target and prints a table row:
# scenario target req/s p50 p99 max (µs) requests non-2xx share, and the CPU
# time per request of the proxy (sluice proxy or NGINX's workers) and of the
# upstream.
run() {
	local scenario=$1 target=$2 url=$3 t=$4 c=$5 out proxy_pid
	out=$dir/wrk-$scenario-$target.txt
	case $target in
	sluice) proxy_pid=$sl_pid ;;
	nginx) proxy_pid=$ng_pid ;;
	*) proxy_pid= ;;
	esac
	if [ "$scenario" != limited ]; then
		wrk -t"$t" -c"$c" -d"$WARMUP" "$url" >/dev/null
	fi
	local up0 px0 up1 px1
	up0=$(cpu_ticks "$up_pid")
	px0=$([ -n "$proxy_pid" ] && cpu_ticks "$proxy_pid" || echo 0)
	wrk -t"$t" -c"$c" -d"$DURATION" --latency "$url" >"$out"
	up1=$(cpu_ticks "$up_pid")
	px1=$([ -n "$proxy_pid" ] && cpu_ticks "$proxy_pid" || echo 0)
	local rps p50 p99 max total non2xx
	rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
	p50=$(to_us "$(awk '$1 == "50%" {print $2}' "$out")")
	p99=$(to_us "$(awk '$1 == "99%" {print $2}' "$out")")
	max=$(to_us "$(awk '$1 == "Latency" && NF >= 5 {print $4; exit}' "$out")")
	total=$(awk '/requests in/ {print $1}' "$out")
	non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $5}' "$out")
	non2xx=${non2xx:-0}
	if grep -q 'Socket errors' "$out"; then
		echo "warning: $scenario/$target: $(grep 'Socket errors' "$out")" >&2
	fi
	local pxcpu=-
	if [ -n "$proxy_pid" ]; then
		pxcpu=$(cpu_us $((px1 - px0)) "$total")
	fi
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$scenario" "$target" "$rps" "$p50" "$p99" "$max" \
		"$total" "$non2xx" "$(awk -v a="$non2xx" -v b="$total" 'BEGIN {printf "%.2f%%", 100 * a / b}')" \
		"$pxcpu" "$(cpu_us $((up1 - up0)) "$total")"
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "# $(nginx -v 2>&1); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $("$sluice" version 2>/dev/null | head -1 || true)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wrk -t$THREADS -c$CONNS -d$DURATION --latency (open-c1: -t1 -c1), warm-up $WARMUP except for limited"
echo "| scenario | target | req/s | p50 µs | p99 µs | max µs | requests | non-2xx | non-2xx share | proxy CPU µs/req | upstream CPU µs/req |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for scenario in open open-c1 limited; do
	path=/${scenario%-c1}/
	t=$THREADS c=$CONNS
	if [ "$scenario" = open-c1 ]; then
		t=1 c=1
	fi
	run "$scenario" direct "http://127.0.0.1:$up_port$path" "$t" "$c"
	run "$scenario" sluice "http://127.0.0.1:$sl_port$path" "$t" "$c"
	run "$scenario" nginx "http://127.0.0.1:$ng_port$path" "$t" "$c"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
