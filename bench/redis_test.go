package bench

import (
	"context"
	_ "embed"
	"fmt"
	"net"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice/internal/redistest"
)

// gcraLua is the decision every Redis client runs: a GCRA token bucket read
// and updated by one server-side script. redis-ceiling.sh loads the same file.
//
//go:embed testdata/gcra.lua
var gcraLua string

// The arguments of every timed decision: an emission interval of 1 µs and a
// burst of 1e9, i.e. 1e6 decisions per second per key, so that every decision
// is an admission (the script's write path: GET, then SET with an expiry).
// Before the timer starts, every key is given a cost of redisWarmCost, which
// puts its TAT 500 s ahead of the server's clock: the key then exists for the
// whole run, and the timed decisions are admissions on existing keys, as in
// BenchmarkLimiters. redis-ceiling.sh uses the same numbers and key names.
const (
	redisIntervalUS = "1"
	redisBurst      = "1000000000"
	redisCost       = "1"
	redisWarmCost   = "500000000"
	redisNumKeys    = 10_000
	redisHotKey     = "bench:{hot}"
)

// redisKeys returns the keys "bench:{000000000000}" … "bench:{000000009999}":
// the names redis-benchmark's __rand_int__ produces with -r 10000, so that
// redis-ceiling.sh touches the same keys.
func redisKeys() []string {
	ks := make([]string, redisNumKeys)
	for i := range ks {
		ks[i] = fmt.Sprintf("bench:{%012d}", i)
	}
	return ks
}

// redisDecide makes one decision on key and reports whether it was admitted.
// It must not allocate beyond what the client does.
type redisDecide func(ctx context.Context, key *[1]string) (bool, error)

// redisClient is one client under test. open connects to addr and returns the
// decision and a function that closes the client.
type redisClient struct {
	name string
	open func(addr string) (redisDecide, func(), error)
}

var redisClients = []redisClient{
	{"rueidis", openRueidis},
	{"go-redis", openGoRedis},
	{"go-redis-autopipeline", openGoRedisAutoPipeline},
}

// openRueidis is rueidis with its default options: a single-node client
// (found after CLUSTER SLOTS fails), commands from concurrent goroutines
// pipelined automatically onto 2^PipelineMultiplex connections (the default
// multiplex is log2(GOMAXPROCS) capped at 2, i.e. 2 connections at -cpu 2).
// The script is run with (*rueidis.Lua).Exec: EVALSHA, EVAL on NOSCRIPT.
func openRueidis(addr string) (redisDecide, func(), error) {
	return openRueidisGCRA(addr, []string{redisIntervalUS, redisBurst, redisCost})
}

// openRueidisGCRA runs the GCRA script (testdata/gcra.lua) with args
// (emission interval in µs, burst, cost) on a rueidis client with its
// default options.
func openRueidisGCRA(addr string, args []string) (redisDecide, func(), error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		return nil, nil, err
	}
	script := rueidis.NewLuaScript(gcraLua)
	return func(ctx context.Context, key *[1]string) (bool, error) {
		arr, err := script.Exec(ctx, c, key[:], args).ToArray()
		if err != nil {
			return false, err
		}
		if len(arr) != 4 {
			return false, fmt.Errorf("reply of %d elements, want 4", len(arr))
		}
		allowed, err := arr[0].AsInt64()
		return allowed == 1, err
	}, c.Close, nil
}

// openGoRedis is go-redis with its default options: a pool of
// 10×GOMAXPROCS connections (20 at -cpu 2), one command per connection at a
// time, RESP3. The script is run with (*redis.Script).Run: EVALSHA, EVAL on
// NOSCRIPT.
func openGoRedis(addr string) (redisDecide, func(), error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	return goRedisDecide(c), func() { c.Close() }, nil
}

// openGoRedisAutoPipeline is go-redis's own automatic pipelining,
// (*redis.Client).AutoPipeline() with its default options (marked
// EXPERIMENTAL in v9.23): the same client, but concurrent callers' commands
// are batched into pipelines on a separate pool.
func openGoRedisAutoPipeline(addr string) (redisDecide, func(), error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	ap, err := c.AutoPipeline()
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return goRedisDecide(ap), func() { ap.Close(); c.Close() }, nil
}

func goRedisDecide(c goredis.Scripter) redisDecide {
	script := goredis.NewScript(gcraLua)
	args := []any{redisIntervalUS, redisBurst, redisCost}
	return func(ctx context.Context, key *[1]string) (bool, error) {
		arr, err := script.Run(ctx, c, key[:], args...).Slice()
		if err != nil {
			return false, err
		}
		if len(arr) != 4 {
			return false, fmt.Errorf("reply of %d elements, want 4", len(arr))
		}
		allowed, ok := arr[0].(int64)
		if !ok {
			return false, fmt.Errorf("reply element of type %T, want int64", arr[0])
		}
		return allowed == 1, nil
	}
}

// BenchmarkRedisClient compares Redis clients running the same GCRA script
// (testdata/gcra.lua) with EVALSHA against a redis-server the benchmark
// starts on a free loopback port. Each case spawns exactly conc goroutines
// that share b.N decisions; besides ns/op (wall time / b.N) it reports
// decisions per second, the median and 99th percentile latency of one
// decision in microseconds, and denied/op (0 unless the limit was reached).
// keys=10000 spreads the decisions over 10,000 keys; keys=1 is one hot key.
func BenchmarkRedisClient(b *testing.B) {
	addr := redistest.StartServer(b).Addr
	ks := redisKeys()
	warmRedis(b, addr, append([]string{redisHotKey}, ks...))
	for _, s := range redisScenarios(ks) {
		b.Run(s.name(), func(b *testing.B) {
			for _, c := range redisClients {
				b.Run("client="+c.name, func(b *testing.B) {
					benchRedis(b, c, addr, s.keys, s.conc)
				})
			}
		})
	}
}

// benchRedis runs b.N decisions from conc goroutines, each taking the next
// operation number from a shared counter, so that exactly b.N decisions are
// made whatever the goroutines' speeds. Operation i decides on
// keys[i·2654435761 mod len(keys)], a fixed scatter over the keys. Latency is
// recorded per operation into a slice allocated before the timer starts.
func benchRedis(b *testing.B, c redisClient, addr string, keys []string, conc int) {
	decide, closeFn := warmed(b, func() (redisDecide, func(), error) { return c.open(addr) }, keys, conc)
	defer closeFn()
	measure(b, context.Background(), decide, keys, conc).report(b)
}

// warmed opens a decision with open and warms it up over keys from conc
// goroutines: connections dialled, the script's SHA known to the client
// (and the server), the client's pool grown to what conc goroutines use.
// The caller closes it with the function returned.
func warmed(b *testing.B, open func() (redisDecide, func(), error), keys []string, conc int) (redisDecide, func()) {
	decide, closeFn, err := open()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := runRedis(context.Background(), decide, keys, conc, max(20*conc, 2000), nil); err != nil {
		closeFn()
		b.Fatal(err)
	}
	return decide, closeFn
}

// redisScenario is one case of the Redis benchmarks: keys spread the
// decisions, conc goroutines make them.
type redisScenario struct {
	keys []string
	conc int
}

func (s redisScenario) name() string {
	return "keys=" + strconv.Itoa(len(s.keys)) + "/conc=" + strconv.Itoa(s.conc)
}

// redisScenarios returns the cases every Redis benchmark runs: ks at
// concurrency 1, 16, 64 and 256, and one hot key at 64.
func redisScenarios(ks []string) []redisScenario {
	var out []redisScenario
	for _, conc := range []int{1, 16, 64, 256} {
		out = append(out, redisScenario{ks, conc})
	}
	return append(out, redisScenario{[]string{redisHotKey}, 64})
}

// measured is one timed run of b.N decisions.
type measured struct {
	n       float64
	denied  int64
	elapsed time.Duration
	cpu     time.Duration // this process's CPU time; 0 where unknown
	lat     []int64       // per decision, ns, sorted
}

// measure times b.N decisions made by conc goroutines over keys; the timer
// runs only around them. It fails b on an error.
func measure(b *testing.B, ctx context.Context, decide redisDecide, keys []string, conc int) measured {
	m := measured{n: float64(b.N), lat: make([]int64, b.N)}
	runtime.GC()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	start := time.Now()
	denied, err := runRedis(ctx, decide, keys, conc, b.N, m.lat)
	m.elapsed = time.Since(start)
	m.cpu = processCPU() - cpu0
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	m.denied = denied
	slices.Sort(m.lat)
	return m
}

// report reports decisions per second, the median and 99th percentile
// latency, the denials per decision and, where known, client CPU.
func (m measured) report(b *testing.B) {
	b.ReportMetric(m.n/m.elapsed.Seconds(), "ops/s")
	b.ReportMetric(float64(percentile(m.lat, 0.50))/1e3, "p50-µs")
	b.ReportMetric(float64(percentile(m.lat, 0.99))/1e3, "p99-µs")
	b.ReportMetric(float64(m.denied)/m.n, "denied/op")
	if m.cpu > 0 {
		b.ReportMetric(m.cpu.Seconds()*1e6/m.n, "cli-cpu-µs/op")
	}
}

// runRedis makes n decisions from conc goroutines and returns how many were
// denied. If lat is not nil, lat[i] receives the latency of operation i in
// nanoseconds.
func runRedis(ctx context.Context, decide redisDecide, keys []string, conc, n int, lat []int64) (int64, error) {
	var (
		next, denied atomic.Int64
		firstErr     atomic.Pointer[error]
		wg           sync.WaitGroup
	)
	fail := func(err error) { firstErr.CompareAndSwap(nil, &err) }
	bufs := make([][1]string, conc)
	release := make(chan struct{})
	wg.Add(conc)
	for g := range conc {
		go func(key *[1]string) {
			defer wg.Done()
			<-release
			d := int64(0)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || firstErr.Load() != nil {
					break
				}
				key[0] = keys[uint64(i)*2654435761%uint64(len(keys))]
				t0 := time.Now()
				ok, err := decide(ctx, key)
				if lat != nil {
					lat[i] = int64(time.Since(t0))
				}
				if err != nil {
					fail(err)
					break
				}
				if !ok {
					d++
				}
			}
			denied.Add(d)
		}(&bufs[g])
	}
	close(release)
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		return 0, *err
	}
	return denied.Load(), nil
}

// percentile returns the q-quantile of sorted (nearest rank).
func percentile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// warmRedis gives every key a cost of redisWarmCost, pipelined, so that the
// timed decisions find their keys and are admitted.
func warmRedis(b *testing.B, addr string, keys []string) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	args := []string{redisIntervalUS, redisBurst, redisWarmCost}
	ctx := context.Background()
	sha, err := c.Do(ctx, c.B().ScriptLoad().Script(gcraLua).Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	cmds := make(rueidis.Commands, 0, len(keys))
	for _, k := range keys {
		cmds = append(cmds, c.B().Evalsha().Sha1(sha).Numkeys(1).Key(k).Arg(args...).Build())
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			b.Fatal(err)
		}
	}
}

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free a moment
// ago.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// redisProcAttr is set per OS in redis_linux_test.go; elsewhere it is nil.
var redisProcAttr = func() *syscall.SysProcAttr { return nil }

// TestRedisGCRAScript checks the decisions of testdata/gcra.lua: a burst of 2
// at one per second admits two requests, denies the third with a retry of
// about a second, and leaves the key to expire when the bucket is full again.
func TestRedisGCRAScript(t *testing.T) {
	addr := redistest.StartServer(t).Addr
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	script := rueidis.NewLuaScript(gcraLua)
	decide := func(cost string) []int64 {
		t.Helper()
		r, err := script.Exec(ctx, c, []string{"test:{gcra}"}, []string{"1000000", "2", cost}).AsIntSlice()
		if err != nil {
			t.Fatal(err)
		}
		if len(r) != 4 {
			t.Fatalf("reply %v, want 4 integers", r)
		}
		return r
	}
	const s = 1_000_000 // µs
	// The server's clock moves between calls, so durations are checked
	// within 100 ms.
	near := func(got, want int64) bool { return got <= want && got > want-100_000 }
	if r := decide("1"); r[0] != 1 || r[1] != 1 || r[2] != 0 || !near(r[3], 1*s) {
		t.Fatalf("first: %v, want [1 1 0 ~1s]", r)
	}
	if r := decide("1"); r[0] != 1 || r[1] != 0 || r[2] != 0 || !near(r[3], 2*s) {
		t.Fatalf("second: %v, want [1 0 0 ~2s]", r)
	}
	if r := decide("1"); r[0] != 0 || r[1] != 0 || !near(r[2], 1*s) || !near(r[3], 2*s) {
		t.Fatalf("third: %v, want [0 0 ~1s ~2s]", r)
	}
	if r := decide("3"); r[0] != 0 {
		t.Fatalf("cost above the burst: %v, want a denial", r)
	}
	pttl, err := c.Do(ctx, c.B().Pttl().Key("test:{gcra}").Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if pttl < 1800 || pttl > 2000 {
		t.Fatalf("PTTL %d ms, want about 2000", pttl)
	}
}
