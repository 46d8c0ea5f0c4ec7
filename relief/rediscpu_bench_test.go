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
// same load. The lease rows lease at most 1% of a limit: nothing of these
// limits of 100 (see BenchmarkRedisCPUPerDecisionZipfLargeLimit).
func BenchmarkRedisCPUPerDecisionZipf(b *testing.B) {
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Minute}
	benchRedisCPUZipf(b, lim, []cpuRow{
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
		{"lease-1%", 0, leases(0.01, 100*time.Millisecond, false)},
		{"default+lease-1%", 200 * time.Microsecond, leases(0.01, 100*time.Millisecond, true)},
	})
}

// BenchmarkRedisCPUPerDecisionZipfLargeLimit is
// BenchmarkRedisCPUPerDecisionZipf's load on limits of 10,000 a minute,
// which it never reaches: leases of at most 1% (100 units) pay on the
// keys a process asks for at least twice a Hold; the last row's follow
// a fleet of 4 (the 4 processes here), at most 25 units each.
func BenchmarkRedisCPUPerDecisionZipfLargeLimit(b *testing.B) {
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10_000, Period: time.Minute}
	benchRedisCPUZipf(b, lim, []cpuRow{
		{"none", 0, func(s *redisstore.Store) sluice.Limiter { return s }},
		{"default(cache+coalesce)", 200 * time.Microsecond, func(s *redisstore.Store) sluice.Limiter {
			return relief.NewOverLimitCache(s, relief.CacheConfig{MaxHold: time.Second})
		}},
		{"lease-1%-hold-100ms", 0, leases(0.01, 100*time.Millisecond, false)},
		{"lease-1%-hold-1s", 0, leases(0.01, time.Second, false)},
		{"default+lease-1%-hold-100ms", 200 * time.Microsecond, leases(0.01, 100*time.Millisecond, true)},
		{"default+lease-1%-hold-1s", 200 * time.Microsecond, leases(0.01, time.Second, true)},
		{"default+lease-1%-fleet-of-4", 200 * time.Microsecond, fleetLeases(0.01, 100*time.Millisecond, 4)},
	})
}

// fleetLeases is serve's default stack with leases that follow a fleet
// that has counted n processes: leases of at most share of a limit
// divided by n, behind an over-limit cache.
func fleetLeases(share float64, hold time.Duration, n int) func(*redisstore.Store) sluice.Limiter {
	return func(s *redisstore.Store) sluice.Limiter {
		b := relief.NewBatcher(s, relief.BatchConfig{LeaseShare: share, Hold: hold, Processes: func() int { return n }})
		return relief.NewOverLimitCache(b, relief.CacheConfig{MaxHold: time.Second})
	}
}

// leases is a row's stack: a Batcher of leases of share and hold, behind
// an over-limit cache if cached.
func leases(share float64, hold time.Duration, cached bool) func(*redisstore.Store) sluice.Limiter {
	return func(s *redisstore.Store) sluice.Limiter {
		var l sluice.Limiter = relief.NewBatcher(s, relief.BatchConfig{LeaseShare: share, Hold: hold})
		if cached {
			l = relief.NewOverLimitCache(l, relief.CacheConfig{MaxHold: time.Second})
		}
		return l
	}
}

// cpuRow is a row of the Redis CPU benchmarks: a stack of relief over
// each process's store, which coalesces decisions for up to coalesce.
type cpuRow struct {
	name     string
	coalesce time.Duration
	wrap     func(*redisstore.Store) sluice.Limiter
}

// benchRedisCPUZipf runs each row on its own redis-server: 4 processes of
// 16 concurrent requests, Zipf s = 1.1 over 10,000 keys, each of limit lim.
func benchRedisCPUZipf(b *testing.B, lim sluice.Limit, rows []cpuRow) {
	const procs, conc, keys = 4, 16, 10_000
	for _, row := range rows {
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
