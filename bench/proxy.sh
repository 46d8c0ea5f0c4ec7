#!/usr/bin/env bash
# proxy.sh measures `sluice proxy` against NGINX limit_req and HAProxy's
# stick tables with wrk: the same trivial upstream reached directly, through
# sluice proxy, through three prototype forwarding engines (bench/proxyengine:
# a bare httputil.ReverseProxy, the floor of Go's reverse proxy; a lean
# net/http handler; fasthttp), through NGINX and through HAProxy, in one run.
# See BENCHMARKS.md, "Reverse proxy (sluice proxy vs NGINX limit_req)" and
# "The proxy's forwarding engine", and docs/adr/0001-proxy-engine.md.
#
# Usage, from the repository or from bench/:
#
#	bench/proxy.sh
#
# Needs wrk, nginx, curl, pgrep and ss on PATH, haproxy for the HAProxy
# rows (left out, with a note, when it is not installed), and Go to build
# sluice and the engines (or SLUICE=path to a sluice binary built
# beforehand). Everything listens on
# loopback ports it picks; everything it starts is killed when it exits.
# Environment knobs, with their defaults:
#
#	DURATION=15s   wrk -d for every measured run
#	WARMUP=3s      wrk -d of the unmeasured warm-up before the open runs
#	THREADS=2 CONNS=64   wrk -t and -c of the loaded runs
#	WORKERS=2      worker_processes of both NGINX instances
#	KEEP=1         keep the temporary directory (configs, logs, wrk output)
#	TARGETS="direct sluice floor lean fast nginx haproxy"   which to run,
#	               in this order (the upstream always runs)
#
# The upstream is an NGINX server block that answers `return 200 "ok\n"`,
# in an NGINX instance of its own: the cheapest upstream there is (no body
# to read, no allocation, no garbage collector sharing the cores with the
# Go proxy), and the same for all three targets.
#
# Scenarios, one run of each target per scenario:
#
#	open   path /open/: rate=1000000r/s burst=100000 nodelay, one key (the
#	       client address), far above what the machine can serve, so no
#	       request is limited and the numbers are the proxies' overhead;
#	       wrk -t$THREADS -c$CONNS
#	open-c1  the same with wrk -t1 -c1: one request at a time, the latency
#	       of a proxy hop without queueing
#	limited  path /limited/: rate=1000r/s burst=100 nodelay, one key;
#	       wrk -t$THREADS -c$CONNS, and the share of 429s
#	limited-log  the same with each refusal logged, by a second sluice
#	       proxy (its access log to a file: one line per refusal) and a
#	       second NGINX (limit_req_log_level error, its default: one
#	       error_log line per refusal); rows sluice and nginx only
#	       (HAProxy logs to syslog only, which this script does not run)
#
# Each row also gives the CPU time per request, from /proc, of the proxy
# (the sluice process; NGINX's master and workers) and of the upstream, over
# the measured run.
#
# Every proxy uses its defaults otherwise, with access logs off and, but
# for limited-log, refusals not logged: sluice proxy -access-log off (its
# access log has refusals and errors only), NGINX access_log off and
# limit_req_log_level info under error_log warn (by default NGINX writes
# an error_log line for every refusal, at level error, even with
# access_log off; logging one side's refusals only would compare unlike
# work). sluice proxy uses its memory store. NGINX runs worker_processes 2 (the machine's
# cores, as GOMAXPROCS for sluice) and keeps idle upstream connections
# (keepalive 128), as sluice's transport does.
#
# The engines of bench/proxyengine (-engine floor, lean, fast) have the
# same two routes with the same rates in a memstore keyed by the client
# address, and answer 429 with Retry-After and a short problem+json body;
# "floor" has no limit at all (its "limited" row forwards everything).
#
# HAProxy runs nbthread 2 and reuses upstream connections (http-reuse
# always). Its limit is the usual stick-table one: the client address is
# tracked in a table per route storing http_req_rate(1s), and a request is
# denied with 429 when the rate, this request included, is over rate+burst
# (1,100,000 for open, 1,100 for limited). It is not a leaky bucket: the
# rate is a sliding count over the last second, and it counts refused
# requests too, so a client that keeps sending above the limit is refused
# entirely rather than admitted at the rate (NGINX and sluice admit 1,000/s
# to such a client; HAProxy admits about the first 1,100 and then what the
# sliding count lets through). The open scenario, where nothing is
# limited, compares like with like; limited compares the cost of a refusal.
set -euo pipefail

DURATION=${DURATION:-15s}
WARMUP=${WARMUP:-3s}
THREADS=${THREADS:-2}
CONNS=${CONNS:-64}
WORKERS=${WORKERS:-2}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

if [ -z "${TARGETS:-}" ]; then
	TARGETS="direct sluice floor lean fast nginx haproxy"
	if ! command -v haproxy >/dev/null; then
		echo "proxy.sh: haproxy is not installed: no HAProxy rows" >&2
		TARGETS=${TARGETS% haproxy}
	fi
fi

# wants reports whether target $1 is to be run.
wants() {
	case " $TARGETS " in *" $1 "*) return 0 ;; esac
	return 1
}

for tool in wrk nginx curl pgrep ss $(wants haproxy && echo haproxy); do
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
free_port hp_port
free_port fl_port
free_port le_port
free_port fa_port
free_port sll_port
free_port ngl_port

if [ -n "${SLUICE:-}" ]; then
	sluice=$SLUICE
else
	sluice=$dir/sluice
	(cd "$root" && go build -o "$sluice" ./cmd/sluice)
fi
engine=$dir/proxyengine
(cd "$here" && go build -o "$engine" ./proxyengine)

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

mkdir -p "$dir/upstream" "$dir/nginx" "$dir/nginx-log"
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

# nginx_proxy_conf prints the config of the NGINX proxy named $1 on port
# $2, whose refusals are logged at level $3: info, under error_log warn,
# is not logged; error (NGINX's default) is.
nginx_proxy_conf() {
	nginx_conf "$1"
	cat <<EOF
    limit_req_zone \$binary_remote_addr zone=open:1m rate=1000000r/s;
    limit_req_zone \$binary_remote_addr zone=limited:1m rate=1000r/s;
    limit_req_status 429;
    limit_req_log_level $3;
    upstream backend {
        server 127.0.0.1:$up_port;
        keepalive 128;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$2;
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
}
nginx_proxy_conf nginx "$ng_port" info >"$dir/nginx/nginx.conf"
nginx_proxy_conf nginx-log "$ngl_port" error >"$dir/nginx-log/nginx.conf"

{
	printf 'listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:%s\naccess_log: "off"\n' "$sl_port" "$up_port"
	cat "$here/testdata/proxy-routes.yaml"
} >"$dir/sluice.yaml"
{
	printf 'listen: 127.0.0.1:%s\nupstream: http://127.0.0.1:%s\naccess_log: %s\n' "$sll_port" "$up_port" "$dir/sluice-access.log"
	cat "$here/testdata/proxy-routes.yaml"
} >"$dir/sluice-log.yaml"

cat >"$dir/haproxy.cfg" <<EOF
global
    nbthread $WORKERS
    maxconn 4096
defaults
    mode http
    timeout connect 5s
    timeout client 75s
    timeout server 60s
    option http-keep-alive
    http-reuse always
frontend proxy
    bind 127.0.0.1:$hp_port
    acl open path_beg /open/
    acl limited path_beg /limited/
    http-request track-sc0 src table open if open
    http-request track-sc0 src table limited if limited
    http-request deny deny_status 429 if open { sc_http_req_rate(0) gt 1100000 }
    http-request deny deny_status 429 if limited { sc_http_req_rate(0) gt 1100 }
    default_backend upstream
backend upstream
    server up 127.0.0.1:$up_port
backend open
    stick-table type ip size 100k expire 10s store http_req_rate(1s)
backend limited
    stick-table type ip size 100k expire 10s store http_req_rate(1s)
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
sll_pid= ngl_pid=
if wants sluice; then
	"$sluice" proxy -config "$dir/sluice-log.yaml" -admin-addr "" -watch=false -log-level warn >"$dir/sluice-log.out" 2>&1 &
	sll_pid=$!
	pids+=($sll_pid)
fi
if wants nginx; then
	nginx -p "$dir/nginx-log" -c "$dir/nginx-log/nginx.conf" -e "$dir/nginx-log/error.log" &
	ngl_pid=$!
	pids+=($ngl_pid)
fi
hp_pid=
if wants haproxy; then
	haproxy -db -f "$dir/haproxy.cfg" >"$dir/haproxy.out" 2>&1 &
	hp_pid=$!
	pids+=($hp_pid)
fi
# start_engine starts bench/proxyengine's engine $1 on port $2.
start_engine() {
	"$engine" -engine "$1" -listen "127.0.0.1:$2" -upstream "http://127.0.0.1:$up_port" >"$dir/$1.out" 2>&1 &
}
start_engine floor "$fl_port"
fl_pid=$!
start_engine lean "$le_port"
le_pid=$!
start_engine fast "$fa_port"
fa_pid=$!
pids+=($fl_pid $le_pid $fa_pid)

# Each target's port, and each proxy's process (whose CPU time is counted).
declare -A port=([direct]=$up_port [sluice]=$sl_port [floor]=$fl_port [lean]=$le_port
	[fast]=$fa_port [nginx]=$ng_port)
declare -A pid=([sluice]=$sl_pid [floor]=$fl_pid [lean]=$le_pid [fast]=$fa_pid
	[nginx]=$ng_pid)
if [ -n "$hp_pid" ]; then
	port[haproxy]=$hp_port
	pid[haproxy]=$hp_pid
fi
# The logging twins of limited-log, under their target's name.
if [ -n "$sll_pid" ]; then
	port[sluice-log]=$sll_port
	pid[sluice-log]=$sll_pid
fi
if [ -n "$ngl_pid" ]; then
	port[nginx-log]=$ngl_port
	pid[nginx-log]=$ngl_pid
fi
for target in $TARGETS; do
	[ -n "${port[$target]:-}" ] || { echo "proxy.sh: unknown target $target" >&2; exit 1; }
done

for p in "${port[@]}"; do
	wait_up "http://127.0.0.1:$p/open/"
done

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
# time per request of the proxy (its process, NGINX's workers too) and of
# the upstream.
run() {
	local scenario=$1 target=$2 url=$3 t=$4 c=$5 out proxy_pid
	out=$dir/wrk-$scenario-$target.txt
	proxy_pid=${pid[$target]:-}
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

built="built from the checkout"
if [ -n "${SLUICE:-}" ]; then
	built="sluice prebuilt ($SLUICE), engines built from the checkout"
fi
if [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	built="$built, which has uncommitted changes"
fi
echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown), $built"
peers=$(nginx -v 2>&1)
if wants haproxy; then
	peers="$peers; $(haproxy -v | awk 'NR == 1 {print $1, $2, $3}')"
fi
echo "# $peers; $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $("$sluice" version 2>/dev/null | head -1 || true)"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wrk -t$THREADS -c$CONNS -d$DURATION --latency (open-c1: -t1 -c1), warm-up $WARMUP except for limited"
echo "| scenario | target | req/s | p50 µs | p99 µs | max µs | requests | non-2xx | non-2xx share | proxy CPU µs/req | upstream CPU µs/req |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for scenario in open open-c1 limited limited-log; do
	case $scenario in
	open*) path=/open/ ;;
	*) path=/limited/ ;;
	esac
	t=$THREADS c=$CONNS
	if [ "$scenario" = open-c1 ]; then
		t=1 c=1
	fi
	for target in $TARGETS; do
		if [ "$scenario" = limited-log ]; then
			case $target in sluice | nginx) ;; *) continue ;; esac
			target=$target-log
		fi
		run "$scenario" "$target" "http://127.0.0.1:${port[$target]}$path" "$t" "$c"
	done
done
# Each side's refusals logged in limited-log, and none in limited: the
# rows compare like with like only if these say so.
logged() {
	if [ -f "$1" ]; then grep -c -- "$2" "$1" || true; else echo 0; fi
}
echo "# refusals logged: limited: sluice $(logged "$dir/sluice.out" ' 429 '), nginx $(logged "$dir/nginx/error.log" 'limiting requests');" \
	"limited-log: sluice $(logged "$dir/sluice-access.log" ' 429 '), nginx $(logged "$dir/nginx-log/error.log" 'limiting requests')"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
