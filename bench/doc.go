// Package bench compares Sluice's in-memory store with other Go rate
// limiters in one `go test -bench` run. It is a module of its own, so that the
// peers never become dependencies of Sluice; the root module's `go test ./...`
// does not include it.
//
// Run it from this directory:
//
//	go test -run '^$' -bench . -benchmem -count 5 -cpu 2 | tee bench.txt
//	go run golang.org/x/perf/cmd/benchstat@latest bench.txt
//
// Narrow it with -bench, for example -bench 'Limiters/hotkey' or
// -bench 'Limiters/keys=100000/parallel/sluice'.
//
// Every limiter is asked for one decision per operation:
//
//   - sluice-<algorithm>: memstore.New(memstore.Config{}) and
//     (*Store).AllowN(ctx, key, lim, 1), once per algorithm.
//   - x-time-rate: golang.org/x/time/rate, a map[string]*rate.Limiter under a
//     sync.Mutex, a limiter created on first use, then lim.Allow().
//   - httprate: github.com/go-chi/httprate's sliding-window estimate over its
//     local counter, as (*RateLimiter).OnLimit computes it, without the HTTP
//     headers (OnLimit needs an http.ResponseWriter and an *http.Request).
//   - ulule-limiter: github.com/ulule/limiter/v3 with its memory store,
//     (*Limiter).Get(ctx, key).
//   - sethvargo-limiter: github.com/sethvargo/go-limiter's memorystore,
//     Take(ctx, key).
//
// The cases:
//
//   - hotkey: one goroutine, the same key every call.
//   - keys=100000/parallel: b.RunParallel over 100,000 pre-generated keys
//     ("user:0" … "user:99999"), each goroutine walking the slice from its
//     own offset. Every limiter holds every key before the timer starts, so
//     the numbers are decisions on existing keys, not insertions.
//
// The nominal limit is 1e9 per second everywhere, so that nearly every
// decision is an admission; the exceptions (two of Sluice's algorithms cannot
// express it exactly, and go-limiter refills a key this large to only one
// token a second after its first interval) are described at the limits in
// limiters_test.go. Each benchmark reports denied/op, the fraction of
// decisions that were denials, so that a limiter measured on its denial path
// shows.
//
// BenchmarkClock times time.Now and time.Since alone: every limiter reads the
// clock once per decision, so they are the floor under every number.
//
// BenchmarkRedisClient (redis_test.go) compares Redis clients for the Redis
// store: github.com/redis/rueidis, github.com/redis/go-redis/v9 and go-redis's
// experimental AutoPipeline, each with default options, running the same GCRA
// script (testdata/gcra.lua) with EVALSHA against a redis-server the
// benchmark starts on a free loopback port and stops at the end. It skips if
// redis-server is not installed. Each case spawns exactly conc goroutines
// (1, 16, 64, 256 over 10,000 keys; 64 on one hot key) that share b.N
// decisions, and reports ops/s, p50-µs and p99-µs. Run it with a fixed count
// of operations:
//
//	go test -run '^$' -bench RedisClient -benchmem -count 10 -cpu 2 -benchtime 20000x
//
// redis-ceiling.sh runs the same script with redis-benchmark and pipelining,
// the ceiling for those numbers.
//
// BenchmarkRedisLimiter (redislimiter_test.go) compares Redis-backed rate
// limiters with the same harness, cases and names
// (keys=10000/conc=64/limiter=sluice-redisstore): Sluice's redisstore
// (redisstore.New with a redis:// URL, AllowN with
// sluice.PerSecond(1e6).WithBurst(1e9)), github.com/go-redis/redis_rate/v10
// (NewLimiter on a default go-redis v9 client, AllowN with PerSecond(1e6) and
// Burst 1e9), and script-only, testdata/gcra.lua on a default rueidis client,
// for reference. Every key is charged half its burst through each limiter
// before the timer starts, so all timed decisions are admissions on existing
// keys. Besides ops/s, p50-µs, p99-µs and denied/op it reports the server's
// time per decision inside the script (lua-µs/op, INFO commandstats) and its
// CPU time (srv-cpu-µs/op, INFO cpu), and on Linux this process's CPU time
// (cli-cpu-µs/op):
//
//	go test -run '^$' -bench RedisLimiter -benchmem -count 5 -cpu 2 -benchtime 20000x
//
// BenchmarkMiddleware (middleware_test.go) measures what HTTP rate limiting
// middleware adds to a request on the allowed path: a pre-built GET / (its
// RemoteAddr one of 1,000 addresses 203.0.x.y:1234, every one already known
// to the middleware) served through the middleware to a handler that writes
// 200 and no body, with a reusable ResponseWriter whose header map is emptied
// with clear before each request (same for every row). The limit is 1e9 per
// second per client IP; a response other than 200 fails the benchmark. Rows:
// none (the handler alone, the baseline), sluice-httplimit (memstore, one
// per-IP token bucket policy, draft headers), sluice-httplimit-legacy (also
// X-RateLimit-*), httprate (httprate.LimitByIP's key and defaults) and
// tollbooth (v7, keyed by the peer address only), each also under
// b.RunParallel:
//
//	go test -run '^$' -bench Middleware -benchmem -count 6 -cpu 2
//
// BenchmarkRLS (rls_test.go) is the load generator of the rate limit
// service: service.New with one rule (descriptor key user, a fixed window of
// 1e9 per second, so every decision is admitted), draft-11 headers and
// Prometheus metrics, as `sluice serve` runs it, registered on a gRPC server
// built as `sluice serve` builds it (service.GRPCServerOptions) on
// 127.0.0.1:0 in this process, and called through go-control-plane's
// generated client over one shared gRPC connection (insecure credentials).
// With BenchmarkRedisClient's harness (exactly conc goroutines sharing b.N
// calls, conc 1, 16 and 64, on 10,000 descriptor values or one hot value) it
// reports ops/s, p50-µs, p99-µs, max-µs, denied/op, CPU, goroutines and
// collections per decision for the service on memstore (also on a default
// grpc.NewServer(), the A/B of those options), on redisstore (with the
// service's failure policy, as `sluice serve --store redis://…`) and on
// envoyproxy/ratelimit's INCRBY+EXPIRE pipeline; and, without the service,
// that pipeline sent straight to Redis by rueidis and by go-redis, the
// baselines of the service's Redis goal (the x-rueidis and x-goredis
// ratios):
//
//	go test -run '^$' -bench RLS -benchmem -count 3 -cpu 2 -benchtime 20000x
//
// TestProxyAdmittedCounts (proxy_test.go) checks that `sluice proxy` admits
// exactly what NGINX's limit_req admits: it starts both (sluice from $SLUICE
// or built with `go build`, nginx from PATH, each with one route per limit)
// in front of one httptest upstream, sends each limit the same scheduled
// arrivals, every one at least a fifth of a period away from the time its
// decision would flip, and compares the 200s and 429s of both with a model
// of NGINX's accounting, and the delays of the delaying limits. It is
// skipped with -short or without nginx:
//
//	go test -run ProxyAdmittedCounts -v -count 1
//
// proxy.sh, a script rather than a test, measures the throughput and
// latency of `sluice proxy`, NGINX with limit_req, HAProxy with a stick
// table's http_req_rate, the forwarding engines of proxyengine (a bare
// httputil.ReverseProxy as the floor, a lean net/http handler, fasthttp) and
// the upstream alone with wrk; see BENCHMARKS.md, "Reverse proxy (sluice
// proxy vs NGINX limit_req)" and docs/adr/0001-proxy-engine.md.
//
// cluster.sh, a script too, starts an M-shard Redis Cluster and N `sluice
// serve` processes on one machine and drives them over the RLS gRPC API
// with clusterload (Zipf load), reporting decisions/s, Sluice's and Redis's
// CPU per decision and the admitted count against the limit; see
// BENCHMARKS.md, "A fleet on one machine", and docs/scale.md, the capacity
// model built on its figures. It is not part of bench-all.sh.
//
// redis-cpu.sh, on one redis-server, drives the same Zipf load through
// clusterload at envoyproxy/ratelimit (built as bench-all.sh builds it) and
// at `sluice serve` with its default, each hot-path relief alone and none,
// per rule (100 and 10,000 a second and a minute), and reports Redis's and
// the server's CPU per decision, store operations per decision and the
// admitted count against the limit; see BENCHMARKS.md, "Redis CPU per
// decision beside envoyproxy/ratelimit", and docs/scale.md. It is not part
// of bench-all.sh either.
//
// bench-all.sh (make bench-all in the repository) runs every table above,
// and proxy.sh, in one run, and writes them stamped with commit, machine and
// load average into BENCHMARKS.md's last section.
package bench
