package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// The nominal limit of BenchmarkRedisLimiter, the same for every limiter: a
// token bucket of 1e6 per second (an emission interval of exactly 1 µs, which
// Sluice's Redis store keeps in whole microseconds) with a burst of 1e9, so
// that nearly every decision is an admission. Before the timer starts every
// key is charged redisLimitWarm, half the burst, through the limiter under
// test: its state then lies 500 s ahead of the server's clock and the key
// exists for the whole run, so that the timed decisions are admissions on
// existing keys, as in BenchmarkRedisClient.
const (
	redisLimitN     = 1_000_000
	redisLimitBurst = 1_000_000_000
	redisLimitWarm  = redisLimitBurst / 2
)

// redisLimiter is one Redis-backed limiter under test. open connects to addr
// and returns a decision of the given cost and a function that closes the
// limiter's client.
type redisLimiter struct {
	name string
	open func(addr string, cost int) (redisDecide, func(), error)
}

var redisLimiters = []redisLimiter{
	{"sluice-redisstore", openSluiceRedis},
	{"redis-rate", openRedisRate},
	{"script-only", openScriptOnly},
}

// openSluiceRedis is Sluice's Redis store as an application opens it,
// redisstore.New with only a URL (a rueidis client with its defaults), and
// (*Store).AllowN with sluice.PerSecond(1e6).WithBurst(1e9): its token
// bucket script (GCRA) with EVALSHA.
func openSluiceRedis(addr string, cost int) (redisDecide, func(), error) {
	s, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://" + addr})
	if err != nil {
		return nil, nil, err
	}
	lim := sluice.PerSecond(redisLimitN).WithBurst(redisLimitBurst)
	return func(ctx context.Context, key *[1]string) (bool, error) {
		r, err := s.AllowN(ctx, key[0], lim, cost)
		return r.Allowed, err
	}, func() { s.Close() }, nil
}

// openRedisRate is github.com/go-redis/redis_rate/v10 on a go-redis v9 client
// with its default options, redis_rate.NewLimiter(rdb) and
// (*Limiter).AllowN with redis_rate.PerSecond(1e6) and its Burst raised to
// 1e9: its GCRA script with EVALSHA (go-redis's Script.Run).
func openRedisRate(addr string, cost int) (redisDecide, func(), error) {
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	l := redis_rate.NewLimiter(rdb)
	lim := redis_rate.PerSecond(redisLimitN)
	lim.Burst = redisLimitBurst
	return func(ctx context.Context, key *[1]string) (bool, error) {
		r, err := l.AllowN(ctx, key[0], lim, cost)
		if err != nil {
			return false, err
		}
		return r.Allowed > 0, nil
	}, func() { rdb.Close() }, nil
}

// openScriptOnly is the reference for the other two: the bare GCRA script of
// BenchmarkRedisClient (testdata/gcra.lua, the script redis-ceiling.sh runs)
// on the same rueidis client as Sluice's store, with the same limit, but
// none of the store's work (no validation, no key prefix, no decoding of a
// Result).
func openScriptOnly(addr string, cost int) (redisDecide, func(), error) {
	return openRueidisGCRA(addr, []string{"1", strconv.Itoa(redisLimitBurst), strconv.Itoa(cost)}) // 1 µs = 1/1e6 s
}

// BenchmarkRedisLimiter compares Redis-backed rate limiters, each making one
// decision per operation on the same limit, against a redis-server the
// benchmark starts on a free loopback port. The harness is
// BenchmarkRedisClient's: each case spawns exactly conc goroutines that share
// b.N decisions and reports ops/s, p50-µs, p99-µs and denied/op. It also
// reports what the server spent per decision, from its INFO reset before and
// read after the timed decisions: lua-µs/op, the time inside the script
// (INFO commandstats usec_per_call of EVALSHA), and srv-cpu-µs/op, the
// server's CPU time (user and system, I/O included); and, on Linux,
// cli-cpu-µs/op, the CPU time of this process (the limiter's client, plus
// the harness) per decision.
func BenchmarkRedisLimiter(b *testing.B) {
	addr := redistest.StartServer(b).Addr
	ks := redisKeys()
	all := append([]string{redisHotKey}, ks...)
	for _, l := range redisLimiters {
		warmRedisLimiter(b, l, addr, all)
	}
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	for _, s := range redisScenarios(ks) {
		b.Run(s.name(), func(b *testing.B) {
			for _, l := range redisLimiters {
				b.Run("limiter="+l.name, func(b *testing.B) {
					benchRedisLimiter(b, l, addr, admin, s.keys, s.conc)
				})
			}
		})
	}
}

// warmRedisLimiter charges every key redisLimitWarm through l, from 64
// goroutines.
func warmRedisLimiter(b *testing.B, l redisLimiter, addr string, keys []string) {
	decide, closeFn, err := l.open(addr, redisLimitWarm)
	if err != nil {
		b.Fatal(err)
	}
	defer closeFn()
	const conc = 64
	errs := make([]error, conc)
	var wg sync.WaitGroup
	for g := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var key [1]string
			for i := g; i < len(keys); i += conc {
				key[0] = keys[i]
				ok, err := decide(context.Background(), &key)
				if err == nil && !ok {
					err = fmt.Errorf("%s: warming %q was denied", l.name, keys[i])
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// benchRedisLimiter is benchRedis for a limiter, with the server's and this
// process's CPU time per decision.
func benchRedisLimiter(b *testing.B, l redisLimiter, addr string, admin rueidis.Client, keys []string, conc int) {
	decide, closeFn := warmed(b, func() (redisDecide, func(), error) { return l.open(addr, 1) }, keys, conc)
	defer closeFn()
	ctx := context.Background()

	if err := admin.Do(ctx, admin.B().ConfigResetstat().Build()).Error(); err != nil {
		b.Fatal(err)
	}
	cpu0, err := redisServerCPU(ctx, admin)
	if err != nil {
		b.Fatal(err)
	}
	m := measure(b, ctx, decide, keys, conc)
	cpu1, err := redisServerCPU(ctx, admin)
	if err != nil {
		b.Fatal(err)
	}
	calls, usecPerCall, err := redisEvalshaStats(ctx, admin)
	if err != nil {
		b.Fatal(err)
	}
	// The admin's own INFO calls are not EVALSHA; every decision is one
	// EVALSHA (none fell back to EVAL: the script was loaded in the warm-up).
	if calls != int64(b.N) {
		b.Fatalf("server counted %d EVALSHA calls for %d decisions", calls, b.N)
	}
	m.report(b)
	b.ReportMetric(usecPerCall, "lua-µs/op")
	b.ReportMetric((cpu1-cpu0).Seconds()*1e6/m.n, "srv-cpu-µs/op")
}

// redisInfo returns the fields of one INFO section.
func redisInfo(ctx context.Context, c rueidis.Client, section string) (map[string]string, error) {
	s, err := c.Do(ctx, c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for line := range strings.Lines(s) {
		k, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if ok {
			m[k] = v
		}
	}
	return m, nil
}

// redisServerCPU returns the CPU time the server has used, user and system,
// all threads.
func redisServerCPU(ctx context.Context, c rueidis.Client) (time.Duration, error) {
	m, err := redisInfo(ctx, c, "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, k := range []string{"used_cpu_user", "used_cpu_sys"} {
		f, err := strconv.ParseFloat(m[k], 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s: %w", k, err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}

// redisEvalshaStats returns EVALSHA's calls and usec_per_call since the last
// CONFIG RESETSTAT.
func redisEvalshaStats(ctx context.Context, c rueidis.Client) (calls int64, usecPerCall float64, err error) {
	m, err := redisInfo(ctx, c, "commandstats")
	if err != nil {
		return 0, 0, err
	}
	v, ok := m["cmdstat_evalsha"]
	if !ok {
		return 0, 0, nil
	}
	for field := range strings.SplitSeq(v, ",") {
		k, x, _ := strings.Cut(field, "=")
		switch k {
		case "calls":
			calls, err = strconv.ParseInt(x, 10, 64)
		case "usec_per_call":
			usecPerCall, err = strconv.ParseFloat(x, 64)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("INFO commandstats %q: %w", v, err)
		}
	}
	return calls, usecPerCall, nil
}

// processCPU is this process's CPU time, user and system; set per OS in
// redis_linux_test.go, elsewhere 0 (and cli-cpu-µs/op is not reported).
var processCPU = func() time.Duration { return 0 }
