package bench

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/service"
)

// rlsYAML is the configuration of BenchmarkRLS: one descriptor key, user, with
// envoyproxy/ratelimit's default algorithm (a fixed window, here of one
// second) and a limit far above what the machine can ask for, so that every
// decision is an admission.
const rlsYAML = `domain: bench
descriptors:
  - key: user
    rate_limit:
      unit: second
      requests_per_unit: 1000000000
`

const (
	rlsDomain = "bench"
	rlsLimit  = 1_000_000_000 // requests_per_unit of rlsYAML
	// rlsConns is the number of gRPC connections the load generator opens to
	// the service; the conc goroutines share them round robin. One, as one
	// Envoy worker thread keeps one connection to its rate limit cluster.
	rlsConns = 1
)

// rlsValues returns the values of the descriptor entry user: "000000" …
// "009999".
func rlsValues() []string {
	vs := make([]string, redisNumKeys)
	for i := range vs {
		vs[i] = fmt.Sprintf("%06d", i)
	}
	return vs
}

// rlsRequest is the RateLimitRequest of one decision on user=value, with the
// request's hits_addend left at 0 (meaning 1).
func rlsRequest(value string) *pb.RateLimitRequest {
	return &pb.RateLimitRequest{
		Domain: rlsDomain,
		Descriptors: []*rlpb.RateLimitDescriptor{{
			Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: value}},
		}},
	}
}

// rlsTarget is one row of BenchmarkRLS. Either store is set (the service
// with that store, on a gRPC server, driven by a gRPC client) or direct is
// (a baseline that talks to Redis itself, without the service).
type rlsTarget struct {
	name  string
	redis bool // needs the redis-server
	// store opens the service's Limiter and returns it with a function
	// that closes it.
	store func(addr string) (sluice.Limiter, func(), error)
	// direct opens a baseline decision on a descriptor value.
	direct func(addr string) (redisDecide, func(), error)
	// failure is the service's failure policy, as `sluice serve` sets it
	// for a Redis store; nil for the others.
	failure *service.FailurePolicy
	// grpcDefaults builds the gRPC server with grpc.NewServer() alone,
	// without service.GRPCServerOptions (what `sluice serve` uses): the
	// A/B of those options within one run.
	grpcDefaults bool
	// floor registers rlsFloor instead of the service: a ShouldRateLimit
	// that answers a constant OK, the least any grpc-go RLS costs.
	floor bool
	// opts, when set, are the server's options instead of
	// service.GRPCServerOptions.
	opts func() []grpc.ServerOption
	// coalesced: the store sends several decisions per script call
	// (redisstore.Config.CoalesceWait), so the row checks that cmd ran at
	// most once per decision and that the store failed none, and reports
	// the decisions per call.
	coalesced bool
	// cmd is the Redis command each decision sends exactly once (checked
	// with INFO commandstats), "" when it does not use Redis.
	cmd string
	// baseline: this row's ops/s is remembered, and the rows after it in
	// the same case report their ratio to it.
	baseline bool
}

// rlsTargets are in the order they run within a case: the baselines first,
// so that redisstore can report its ratio to them from the same run.
var rlsTargets = []rlsTarget{
	{name: "floor", floor: true},
	{name: "floor-proto-codec", floor: true, opts: rlsOptionsBefore},
	{name: "memstore", store: openRLSMemstore},
	{name: "memstore-proto-codec", store: openRLSMemstore, opts: rlsOptionsBefore},
	{name: "memstore-grpc-defaults", store: openRLSMemstore, grpcDefaults: true},
	{name: "direct-incrby-expire-rueidis", redis: true, direct: openIncrRueidis, cmd: "incrby", baseline: true},
	{name: "direct-incrby-expire-goredis", redis: true, direct: openIncrGoRedis, cmd: "incrby", baseline: true},
	{name: "service-incrby-expire", redis: true, store: openRLSIncrStore, cmd: "incrby"},
	{name: "redisstore", redis: true, store: openRLSRedisstore, failure: &service.FailurePolicy{Mode: failsafe.Open}, cmd: "evalsha"},
	// The same with and without -redis-coalesce-wait, the store's per-call
	// timeout 1 s instead of 50 ms so that a loaded machine does not fail
	// the rows by a fallback.
	{name: "redisstore-timeout-1s", redis: true, store: openRLSRedisstore, failure: &service.FailurePolicy{Mode: failsafe.Open, Timeout: time.Second}, cmd: "evalsha"},
	{name: "redisstore-coalesce-20us", redis: true, store: openRLSCoalesced(20 * time.Microsecond), failure: &service.FailurePolicy{Mode: failsafe.Open, Timeout: time.Second}, cmd: "evalsha", coalesced: true},
	{name: "redisstore-coalesce-200us", redis: true, store: openRLSCoalesced(200 * time.Microsecond), failure: &service.FailurePolicy{Mode: failsafe.Open, Timeout: time.Second}, cmd: "evalsha", coalesced: true},
}

// openRLSMemstore is the store of `sluice serve` with no --store:
// memstore.New(memstore.Config{}).
func openRLSMemstore(string) (sluice.Limiter, func(), error) {
	m := memstore.New(memstore.Config{})
	return m, func() { m.Close() }, nil
}

// openRLSRedisstore is the store of `sluice serve --store redis://addr`:
// redisstore.New with the URL (rueidis with its defaults); the service puts
// its failure policy (open, behind one breaker) around it, as cmd/sluice's
// serve does.
func openRLSRedisstore(addr string) (sluice.Limiter, func(), error) {
	rs, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://" + addr})
	if err != nil {
		return nil, nil, err
	}
	return rs, func() { rs.Close() }, nil
}

// openRLSCoalesced returns the store of `sluice serve --store redis://addr
// -redis-coalesce-wait wait`, wrapped to count the decisions it failed
// (storeErrors), which failsafe would answer without Redis.
func openRLSCoalesced(wait time.Duration) func(addr string) (sluice.Limiter, func(), error) {
	return func(addr string) (sluice.Limiter, func(), error) {
		rs, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://" + addr, CoalesceWait: wait})
		if err != nil {
			return nil, nil, err
		}
		storeErrors.Store(0)
		return errorCounting{rs}, func() { rs.Close() }, nil
	}
}

// storeErrors counts the decisions that the coalescing row's store failed.
var storeErrors atomic.Int64

// errorCounting is a Limiter that counts its failed decisions in
// storeErrors.
type errorCounting struct{ sluice.Limiter }

func (e errorCounting) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	r, err := e.Limiter.AllowN(ctx, key, lim, cost)
	if err != nil {
		storeErrors.Add(1)
	}
	return r, err
}

// incrKey is envoyproxy/ratelimit's cache key: the service's key (domain,
// then key_value pairs joined by "_") and the start of the current window in
// Unix seconds.
func incrKey(storeKey string, period time.Duration) string {
	p := int64(period / time.Second)
	w := time.Now().Unix() / p * p
	return storeKey + "_" + strconv.FormatInt(w, 10)
}

// incrStore is envoyproxy/ratelimit's Redis fixed window as a sluice.Limiter,
// so that the same service can run on it: per decision, one pipeline of
// INCRBY key cost and EXPIRE key period (rueidis DoMulti, with its default
// options, i.e. automatic pipelining of concurrent callers on top), admitted
// when the count after the increment is within the limit. Like
// envoyproxy/ratelimit it counts denied requests too; the cost is always
// added.
type incrStore struct{ c rueidis.Client }

func openRLSIncrStore(addr string) (sluice.Limiter, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return nil, nil, err
	}
	return incrStore{c}, c.Close, nil
}

func (s incrStore) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	n, err := incrExpireRueidis(ctx, s.c, incrKey(key, lim.Period), int64(cost), int64(lim.Period/time.Second))
	if err != nil {
		return sluice.Result{}, err
	}
	r := sluice.Result{Allowed: n <= int64(lim.Rate), Remaining: max(int(int64(lim.Rate)-n), 0)}
	return r, nil
}

func incrExpireRueidis(ctx context.Context, c rueidis.Client, key string, cost, seconds int64) (int64, error) {
	rs := c.DoMulti(ctx,
		c.B().Incrby().Key(key).Increment(cost).Build(),
		c.B().Expire().Key(key).Seconds(seconds).Build())
	if err := rs[1].Error(); err != nil {
		return 0, err
	}
	return rs[0].AsInt64()
}

// openIncrRueidis is the baseline of the goal without the service: the
// client itself sends incrStore's pipeline, INCRBY and EXPIRE on the key the
// service would use (bench_user_<value>_<window>), on a rueidis client with
// its defaults.
func openIncrRueidis(addr string) (redisDecide, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context, v *[1]string) (bool, error) {
		n, err := incrExpireRueidis(ctx, c, incrKey(rlsDomain+"_user_"+v[0], time.Second), 1, 1)
		return n <= rlsLimit, err
	}, c.Close, nil
}

// openIncrGoRedis is the same baseline on go-redis with its defaults (a pool
// of 10×GOMAXPROCS connections, one pipeline per connection at a time), as
// envoyproxy/ratelimit sends it by default (a connection pool, implicit
// pipelining off): Pipeline(), IncrBy, Expire, Exec.
func openIncrGoRedis(addr string) (redisDecide, func(), error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	return func(ctx context.Context, v *[1]string) (bool, error) {
		key := incrKey(rlsDomain+"_user_"+v[0], time.Second)
		p := c.Pipeline()
		incr := p.IncrBy(ctx, key, 1)
		p.Expire(ctx, key, time.Second)
		if _, err := p.Exec(ctx); err != nil {
			return false, err
		}
		return incr.Val() <= rlsLimit, nil
	}, func() { c.Close() }, nil
}

// BenchmarkRLS measures Sluice's rate limit service as Envoy calls it: the
// service (service.New with the rules of rlsYAML, draft-11 headers and
// Prometheus metrics, as `sluice serve` runs it) registered on a gRPC server
// built as `sluice serve` builds it (grpc.NewServer with
// service.GRPCServerOptions) listening on 127.0.0.1:0 in this process, and a
// load generator of exactly conc goroutines sharing b.N ShouldRateLimit
// calls over rlsConns connection(s) made with go-control-plane's generated
// client (ratelimitv3.NewRateLimitServiceClient, insecure credentials). Each
// call is one request with one descriptor [user=<value>], the value one of
// 10,000 (keys=10000) or always the same (keys=1). Server, client and (for
// the Redis rows) redis-server share the machine's cores.
//
// Rows (see rlsTargets): floor is rlsFloor, a ShouldRateLimit that answers
// a constant OK, on the same server options (floor-proto-codec and
// memstore-proto-codec: on the options before the server's codec,
// rlsOptionsBefore); memstore and redisstore are the service on those
// stores; memstore-grpc-defaults is memstore on grpc.NewServer() without
// options, the A/B of service.GRPCServerOptions; service-incrby-expire is
// the service on envoyproxy/ratelimit's INCRBY+EXPIRE pipeline (incrStore);
// direct-incrby-expire-* send that pipeline straight from the load generator
// to Redis, without gRPC or the service: the baseline the goal
// names. Besides ops/s, p50-µs, p99-µs, max-µs and denied/op, each row
// reports this process's CPU time per decision (cli-cpu-µs/op: load
// generator, gRPC and service together), the goroutines this process
// created per decision (goroutines/op) and its garbage collections per
// 10,000 decisions (gc/10k-op), the Redis rows the server's CPU
// (srv-cpu-µs/op), and the rows after a baseline their ops/s divided by the
// baseline's in the same run (x-<baseline>), and every row after the floor
// its CPU per decision (this process's plus redis-server's) divided by the
// floor's in the same case (cpu-x-floor).
func BenchmarkRLS(b *testing.B) {
	var redisAddr string
	if _, err := exec.LookPath("redis-server"); err == nil {
		redisAddr = redistest.StartServer(b).Addr
	}
	var admin rueidis.Client
	if redisAddr != "" {
		var err error
		admin, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redisAddr}})
		if err != nil {
			b.Fatal(err)
		}
		defer admin.Close()
	}
	rules := rlsRules(b)
	values := rlsValues()
	for _, keys := range [][]string{values, {"hot"}} {
		for _, conc := range []int{1, 16, 64} {
			name := "keys=" + strconv.Itoa(len(keys)) + "/conc=" + strconv.Itoa(conc)
			b.Run(name, func(b *testing.B) {
				baselines := map[string]float64{}
				for _, t := range rlsTargets {
					b.Run("target="+t.name, func(b *testing.B) {
						if t.redis && redisAddr == "" {
							b.Skip("redis-server not found in PATH")
						}
						ops := benchRLS(b, t, rules, redisAddr, admin, keys, conc, baselines)
						if t.baseline {
							baselines[t.name] = ops
						}
					})
				}
			})
		}
	}
}

// rlsFloorCPU is the key of baselines under which benchRLS keeps the floor
// row's CPU per decision.
const rlsFloorCPU = "cpu:floor"

// benchRLS runs one row and returns its decisions per second. Rows after
// the floor in the same case report their CPU per decision divided by the
// floor's (cpu-x-floor).
func benchRLS(b *testing.B, t rlsTarget, rules service.Rules, addr string, admin rueidis.Client, values []string, conc int, baselines map[string]float64) float64 {
	var decide redisDecide
	if t.direct != nil {
		d, closeFn, err := t.direct(addr)
		if err != nil {
			b.Fatal(err)
		}
		defer closeFn()
		decide = d
	} else {
		d, closeFn, err := startRLS(t, rules, addr)
		if err != nil {
			b.Fatal(err)
		}
		defer closeFn()
		decide = d
	}
	ctx := context.Background()

	// Warm up: connections dialled, HTTP/2 windows grown, scripts loaded,
	// pools filled.
	if _, err := runRedis(ctx, decide, values, conc, max(20*conc, 2000), nil); err != nil {
		b.Fatal(err)
	}

	var srv0 time.Duration
	if t.cmd != "" {
		if err := admin.Do(ctx, admin.B().ConfigResetstat().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		storeErrors.Store(0)
		var err error
		if srv0, err = redisServerCPU(ctx, admin); err != nil {
			b.Fatal(err)
		}
	}
	rt0 := readRuntime()
	m := measure(b, ctx, decide, values, conc)
	rt1 := readRuntime()
	n := m.n
	var srvCPU time.Duration
	if t.cmd != "" {
		srv1, err := redisServerCPU(ctx, admin)
		if err != nil {
			b.Fatal(err)
		}
		// Every decision reached Redis, once: failsafe did not answer any
		// of them on its own.
		calls, err := redisCmdCalls(ctx, admin, t.cmd)
		if err != nil {
			b.Fatal(err)
		}
		switch {
		case t.coalesced && (calls > int64(b.N) || calls == 0 || storeErrors.Load() != 0):
			b.Fatalf("server counted %d %s calls for %d decisions, %d failed", calls, strings.ToUpper(t.cmd), b.N, storeErrors.Load())
		case t.coalesced:
			b.ReportMetric(float64(b.N)/float64(calls), "decisions/call")
		case calls != int64(b.N):
			b.Fatalf("server counted %d %s calls for %d decisions", calls, strings.ToUpper(t.cmd), b.N)
		}
		srvCPU = srv1 - srv0
		b.ReportMetric(srvCPU.Seconds()*1e6/n, "srv-cpu-µs/op")
	}
	m.report(b)
	b.ReportMetric(float64(m.lat[len(m.lat)-1])/1e3, "max-µs")
	b.ReportMetric(float64(rt1.goroutines-rt0.goroutines)/n, "goroutines/op")
	b.ReportMetric(float64(rt1.gcs-rt0.gcs)*1e4/n, "gc/10k-op")
	ops := n / m.elapsed.Seconds()
	if t.redis && !t.baseline {
		for name, base := range baselines {
			if name, ok := strings.CutPrefix(name, "direct-incrby-expire-"); ok {
				b.ReportMetric(ops/base, "x-"+name)
			}
		}
	}
	// CPU per decision against the floor's in the same case: this
	// process's, plus redis-server's for the Redis rows.
	cpu := (m.cpu + srvCPU).Seconds() * 1e6 / n
	if t.floor && t.opts == nil {
		baselines[rlsFloorCPU] = cpu
	} else if base := baselines[rlsFloorCPU]; base > 0 && m.cpu > 0 {
		b.ReportMetric(cpu/base, "cpu-x-floor")
	}
	return ops
}

// startRLS opens t's store, starts the service on a gRPC server on a free
// loopback port and returns a decision through go-control-plane's client,
// and a function that stops everything.
func startRLS(t rlsTarget, rules service.Rules, addr string) (redisDecide, func(), error) {
	if t.floor {
		return startRLSServer(t, func(gs grpc.ServiceRegistrar) { pb.RegisterRateLimitServiceServer(gs, rlsFloor{}) }, func() {})
	}
	limiter, closeStore, err := t.store(addr)
	if err != nil {
		return nil, nil, err
	}
	svc, err := service.New(service.Config{
		Limiter:    limiter,
		Rules:      rules,
		Headers:    service.HeadersDraft11,
		Registerer: prometheus.NewRegistry(),
		Failure:    t.failure,
	})
	if err != nil {
		closeStore()
		return nil, nil, err
	}
	return startRLSServer(t, svc.RegisterGRPC, func() { svc.Close(); closeStore() })
}

// startRLSServer starts a gRPC server with t's options on a free loopback
// port, registers its services with register, and returns a decision
// through go-control-plane's client and a function that stops the server
// and then calls closeFn.
func startRLSServer(t rlsTarget, register func(grpc.ServiceRegistrar), closeFn func()) (redisDecide, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		closeFn()
		return nil, nil, err
	}
	var opts []grpc.ServerOption
	switch {
	case t.opts != nil:
		opts = t.opts()
	case !t.grpcDefaults:
		opts = service.GRPCServerOptions()
	}
	gs := grpc.NewServer(opts...)
	register(gs)
	served := make(chan struct{})
	go func() { gs.Serve(ln); close(served) }()
	var conns []*grpc.ClientConn
	stop := func() {
		for _, c := range conns {
			c.Close()
		}
		gs.Stop()
		<-served
		closeFn()
	}
	clients := make([]pb.RateLimitServiceClient, rlsConns)
	for i := range clients {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			stop()
			return nil, nil, err
		}
		conns = append(conns, cc)
		clients[i] = pb.NewRateLimitServiceClient(cc)
	}

	// The requests are built before the timer starts, one per value, and
	// shared by the goroutines (marshalling only reads them).
	reqs := make(map[string]*pb.RateLimitRequest, redisNumKeys+1)
	for _, v := range append(rlsValues(), "hot") {
		reqs[v] = rlsRequest(v)
	}
	var rr sync.Mutex // round robin over clients
	next := 0
	pick := func() pb.RateLimitServiceClient {
		if len(clients) == 1 {
			return clients[0]
		}
		rr.Lock()
		c := clients[next]
		next = (next + 1) % len(clients)
		rr.Unlock()
		return c
	}
	decide := func(ctx context.Context, v *[1]string) (bool, error) {
		req, ok := reqs[v[0]]
		if !ok {
			return false, fmt.Errorf("no request for value %q", v[0])
		}
		resp, err := pick().ShouldRateLimit(ctx, req)
		if err != nil {
			return false, err
		}
		return resp.GetOverallCode() == pb.RateLimitResponse_OK, nil
	}
	return decide, stop, nil
}

// runtimeCounts are counters of the Go runtime that explain CPU per
// decision deterministically: goroutines created (one per call on a gRPC
// server without stream workers) and garbage collections (driven by the
// bytes allocated per call).
type runtimeCounts struct{ goroutines, gcs uint64 }

// readRuntime reads runtimeCounts.
func readRuntime() runtimeCounts {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}, {Name: "/gc/cycles/automatic:gc-cycles"}}
	metrics.Read(s)
	var c runtimeCounts
	if s[0].Value.Kind() == metrics.KindUint64 {
		c.goroutines = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		c.gcs = s[1].Value.Uint64()
	}
	return c
}

// redisCmdCalls returns how many times the server ran cmd since the last
// CONFIG RESETSTAT.
func redisCmdCalls(ctx context.Context, c rueidis.Client, cmd string) (int64, error) {
	m, err := redisInfo(ctx, c, "commandstats")
	if err != nil {
		return 0, err
	}
	v, ok := m["cmdstat_"+cmd]
	if !ok {
		return 0, nil
	}
	for field := range strings.SplitSeq(v, ",") {
		if x, ok := strings.CutPrefix(field, "calls="); ok {
			return strconv.ParseInt(x, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO commandstats %q: no calls", v)
}
