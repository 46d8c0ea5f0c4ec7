package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
)

// BenchmarkAllowN is one admitted decision of cost 1 on Redis's clock, per
// algorithm, from 16 goroutines per CPU spread over 1,000 keys, so that
// rueidis pipelines them and ns/op is mostly the server's time per script;
// allocs/op is what the store and rueidis allocate around each round trip.
//
// keys=envoy is the fixed window under KeyEnvoy (envoyproxy/ratelimit's
// layout, with EXPIRATION_JITTER_MAX_SECONDS' default of 300);
// calendar=month is a fixed window over UTC calendar months.
func BenchmarkAllowN(b *testing.B) {
	sluiceKeys := open(b, singleURL(b), nil)
	envoy := openEnvoy(b, singleURL(b), nil, 300*time.Second)
	ctx := context.Background()
	algs := sluice.Algorithms()
	for i := range len(algs) + 2 {
		a, s, name := sluice.FixedWindow, envoy, "alg=fixed_window/keys=envoy"
		lim := sluice.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Hour, Burst: 1_000_000}
		switch {
		case i < len(algs):
			a, s, name = algs[i], sluiceKeys, "alg="+algs[i].String()
			lim.Algorithm = a
		case i == len(algs)+1:
			s, name = sluiceKeys, "alg=fixed_window/calendar=month"
			lim = sluice.PerCalendar(1_000_000, sluice.Calendar{Unit: sluice.CalendarMonth})
		}
		b.Run(name, func(b *testing.B) {
			keys := benchKeys("bench:")
			parallelOverKeys(b, keys, func(key string) error {
				_, err := s.Allow(ctx, key, lim)
				return err
			})
		})
	}
}

// benchKeys returns 1,000 keys under prefix and a suffix of this run.
func benchKeys(prefix string) []string {
	prefix += strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}

// parallelOverKeys runs call from 16 goroutines per CPU, each call on the
// next of keys in turn, reporting allocations; an error fails b and ends
// that goroutine.
func parallelOverKeys(b *testing.B, keys []string, call func(key string) error) {
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := call(keys[next.Add(1)%int64(len(keys))]); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSlidingLogWork measures what the sliding log costs Redis at rates
// of 10, 1k and 1M per hour, with requests of cost 1 and of cost Rate (one
// request takes the whole allowance): per key, up to 100 admitted decisions
// spread over one period on a test clock, then MEMORY USAGE of the key
// (B/key) and the server's own CPU time per script call from INFO
// commandstats (redis-µs/call). ns/op is the time per key, not a speed to
// compare.
func BenchmarkSlidingLogWork(b *testing.B) {
	for _, rate := range []int{10, 1_000, 1_000_000} {
		for _, cost := range []int{1, rate} {
			b.Run("rate="+strconv.Itoa(rate)+"/cost="+strconv.Itoa(cost), func(b *testing.B) {
				srv := redistest.StartServer(b)
				clock := clocktest.New()
				s := open(b, "redis://"+srv.Addr, clock)
				ctx := context.Background()
				lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: rate, Period: time.Hour}
				calls := min(rate/cost, 100)
				step := lim.Period / time.Duration(calls)
				srv.Do(b, "CONFIG", "RESETSTAT")
				bytes := 0
				for i := range b.N {
					key := "work:" + strconv.Itoa(i)
					for range calls {
						if r, err := s.AllowN(ctx, key, lim, cost); err != nil || !r.Allowed {
							b.Fatalf("AllowN = %+v, %v", r, err)
						}
						clock.Advance(step)
					}
					clock.Advance(-step * time.Duration(calls))
					n, err := strconv.Atoi(strings.TrimSpace(srv.Do(b, "MEMORY", "USAGE", s.Key(sluice.SlidingLog, key), "SAMPLES", "0")))
					if err != nil {
						b.Fatal(err)
					}
					bytes += n
				}
				b.ReportMetric(float64(bytes)/float64(b.N), "B/key")
				b.ReportMetric(evalUsecPerCall(b, srv), "redis-µs/call")
			})
		}
	}
}

// BenchmarkSlidingLogFull is one decision on a full exact log of 64, 1000
// or 100,000 per hour on Redis, on a test clock: the key holds Rate
// entries of cost 1, one every Period/Rate; each decision comes one step
// later, so that the oldest entry leaves and the request is admitted (the
// log stays full). B/key is MEMORY USAGE of the full key, redis-µs/call
// the server's CPU time per script call (INFO commandstats) in the
// measured loop only. ns/op includes the round trip.
func BenchmarkSlidingLogFull(b *testing.B) {
	srv := redistest.StartServer(b)
	clock := clocktest.New()
	s := open(b, "redis://"+srv.Addr, clock)
	ctx := context.Background()
	for _, rate := range []int{64, 1_000, 100_000} {
		b.Run("rate="+strconv.Itoa(rate), func(b *testing.B) {
			lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: rate, Period: time.Hour}
			step := lim.Period / time.Duration(rate)
			key := "full:" + strconv.Itoa(rate)
			take := func() {
				if r, err := s.AllowN(ctx, key, lim, 1); err != nil || !r.Allowed {
					b.Fatalf("AllowN = %+v, %v", r, err)
				}
				clock.Advance(step)
			}
			for range rate {
				take()
			}
			srv.Do(b, "CONFIG", "RESETSTAT")
			for b.Loop() {
				take()
			}
			b.StopTimer()
			n, err := strconv.Atoi(strings.TrimSpace(srv.Do(b, "MEMORY", "USAGE", s.Key(sluice.SlidingLog, key), "SAMPLES", "0")))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(n), "B/key")
			b.ReportMetric(evalUsecPerCall(b, srv), "redis-µs/call")
		})
	}
}

// evalUsecPerCall returns usec_per_call of EVALSHA (or EVAL) from INFO
// commandstats.
func evalUsecPerCall(b *testing.B, srv *redistest.Server) float64 {
	b.Helper()
	var calls, usec float64
	for _, line := range strings.Split(srv.Do(b, "INFO", "commandstats"), "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.IndexByte(line, ':')+1:]), ",") {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				calls += x
			case "usec":
				usec += x
			}
		}
	}
	if calls == 0 {
		return 0
	}
	return usec / calls
}

// BenchmarkScriptCPU reports each algorithm's Redis CPU per decision (INFO
// commandstats, redis-µs/call): admitted and denied decisions of cost 1 on
// 100 keys under 1,000 per second (burst 1,000), on Redis's clock;
// keys=envoy is the fixed window under KeyEnvoy.
func BenchmarkScriptCPU(b *testing.B) {
	algs := sluice.Algorithms()
	for i := range len(algs) + 1 {
		a, name := sluice.FixedWindow, "alg=fixed_window/keys=envoy"
		if i < len(algs) {
			a, name = algs[i], "alg="+algs[i].String()
		}
		b.Run(name, func(b *testing.B) {
			srv := redistest.StartServer(b)
			s := open(b, "redis://"+srv.Addr, nil)
			if i == len(algs) {
				s = openEnvoy(b, "redis://"+srv.Addr, nil, 300*time.Second)
			}
			ctx := context.Background()
			lim := sluice.Limit{Algorithm: a, Rate: 1000, Period: time.Second, Burst: 1000}
			if _, err := s.Allow(ctx, "cpu:warm", lim); err != nil {
				b.Fatal(err)
			}
			srv.Do(b, "CONFIG", "RESETSTAT")
			i := 0
			for b.Loop() {
				if _, err := s.Allow(ctx, "cpu:"+strconv.Itoa(i%100), lim); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(evalUsecPerCall(b, srv), "redis-µs/call")
		})
	}
}
