package relief_test

import (
	"context"
	"math/rand"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/relief"
)

// BenchmarkRedisCPUPerDecisionZipf is redis-server's CPU per decision
// (INFO cpu, user and system) on a Zipf load (s = 1.1 over 10,000 keys, a
// fixed window of 100 a minute per key, so the hot keys go over their
// limit) from 4 processes of 16 concurrent requests each, each row on a
// redis-server of its own: no relief (serve's former default), each
// relief alone, serve's default (the over-limit cache and 200µs
// coalescing) and all three. admitted/op says what each row admits
// of the same load; decisions/call is decisions per EVALSHA. Run it with
// a fixed count, such as -benchtime 40000x, so that every row sends the
// same load.
func BenchmarkRedisCPUPerDecisionZipf(b *testing.B) {
	const procs, conc, keys = 4, 16, 10_000
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Minute}
	type wrap func(*redisstore.Store) sluice.Limiter
	for _, row := range []struct {
		name     string
		coalesce time.Duration
		wrap     wrap
	}{
		{"none", 0, func(s *redisstore.Store) sluice.Limiter { return s }},
		{"cache", 0, func(s *redisstore.Store) sluice.Limiter {
			return relief.NewOverLimitCache(s, relief.CacheConfig{MaxHold: time.Second})
		}},
		{"coalesce-200us", 200 * time.Microsecond, func(s *redisstore.Store) sluice.Limiter { return s }},
		{"reserve-10", 0, func(s *redisstore.Store) sluice.Limiter {
			return relief.NewBatcher(s, relief.BatchConfig{Batch: 10})
		}},
		{"default(cache+coalesce)", 200 * time.Microsecond, func(s *redisstore.Store) sluice.Limiter {
			return relief.NewOverLimitCache(s, relief.CacheConfig{MaxHold: time.Second})
		}},
		{"all-three", 200 * time.Microsecond, func(s *redisstore.Store) sluice.Limiter {
			return relief.NewOverLimitCache(relief.NewBatcher(s, relief.BatchConfig{Batch: 10}), relief.CacheConfig{MaxHold: time.Second})
		}},
	} {
		b.Run(row.name, func(b *testing.B) {
			srv := redistest.StartServer(b)
			ctx := context.Background()
			var fleet []sluice.Limiter
			for range procs {
				s, err := redisstore.New(ctx, redisstore.Config{URL: "redis://" + srv.Addr, CoalesceWait: row.coalesce})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				if _, err := s.AllowN(ctx, "warm", lim, 1); err != nil { // scripts loaded
					b.Fatal(err)
				}
				fleet = append(fleet, row.wrap(s))
			}
			srv.Do(b, "CONFIG", "RESETSTAT")
			cpu0 := redisCPU(b, srv)
			var left, admitted, failed atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			for p, l := range fleet {
				for g := range conc {
					wg.Go(func() {
						z := rand.NewZipf(rand.New(rand.NewSource(int64(p*conc+g))), 1.1, 1, keys-1)
						for left.Add(-1) >= 0 {
							r, err := l.AllowN(ctx, "zipf:"+strconv.FormatUint(z.Uint64(), 10), lim, 1)
							switch {
							case err != nil:
								failed.Add(1)
							case r.Allowed:
								admitted.Add(1)
							}
						}
					})
				}
			}
			wg.Wait()
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d decisions failed", n)
			}
			n := float64(b.N)
			b.ReportMetric(float64(redisCPU(b, srv)-cpu0)/1e3/n, "srv-cpu-µs/op")
			b.ReportMetric(float64(admitted.Load())/n, "admitted/op")
			if m := regexp.MustCompile(`cmdstat_evalsha:calls=(\d+)`).FindStringSubmatch(srv.Do(b, "INFO", "commandstats")); m != nil {
				calls, _ := strconv.ParseFloat(m[1], 64)
				b.ReportMetric(n/calls, "decisions/call")
			}
		})
	}
}

// redisCPU is redis-server's CPU time, user and system (INFO cpu).
func redisCPU(b *testing.B, srv *redistest.Server) time.Duration {
	var total float64
	for _, m := range regexp.MustCompile(`used_cpu_(?:user|sys):([0-9.]+)`).FindAllStringSubmatch(srv.Do(b, "INFO", "cpu"), 2) {
		f, _ := strconv.ParseFloat(m[1], 64)
		total += f
	}
	return time.Duration(total * float64(time.Second))
}
