package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
)

// BenchmarkMemoryPerKey reports what one key costs Redis (MEMORY USAGE,
// SAMPLES 0) after one decision of cost 1, per algorithm, for a key like
// "user:123456". The sliding log holds one 16-byte entry per distinct
// arrival time in a string, at most its rate (see BenchmarkSlidingLogFull).
func BenchmarkMemoryPerKey(b *testing.B) {
	srv := redistest.Single(b)
	s := open(b, "redis://"+srv.Addr, nil)
	for _, a := range sluice.Algorithms() {
		b.Run(a.String(), func(b *testing.B) {
			lim := sluice.Limit{Algorithm: a, Rate: 100, Period: time.Hour, Burst: 100}
			memoryPerKey(b, srv, s, lim, func(key string) string { return s.Key(a, key) })
		})
	}
	// The sliding window with buckets keeps {start, k, k+1 counts}.
	for _, k := range []uint8{2, 4, 8, 16} {
		b.Run("sliding_window_buckets_"+strconv.Itoa(int(k)), func(b *testing.B) {
			lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Hour, Buckets: k}
			memoryPerKey(b, srv, s, lim, func(key string) string { return s.LimitKey(lim, key) })
		})
	}
	// The sliding window with moments keeps {s, k, d, pin, G, k+1 counts,
	// (k+1)·d means, d sums}: after one decision, and after 100 spread over
	// a period (every sub-window holds units, means and sums), on a clock
	// of the test's.
	ctx := context.Background()
	clock := clocktest.New()
	sc := open(b, "redis://"+srv.Addr, clock)
	for _, c := range []struct{ k, d uint8 }{{1, 2}, {8, 4}, {5, 8}, {8, 6}, {16, 2}} {
		for _, spread := range []int{1, 100} {
			b.Run("sliding_window_buckets_"+strconv.Itoa(int(c.k))+"_moments_"+strconv.Itoa(int(c.d))+"_decisions_"+strconv.Itoa(spread), func(b *testing.B) {
				lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Hour, Buckets: c.k, Moments: c.d}
				total := 0
				for i := range b.N {
					key := "user:" + strconv.Itoa(100000+i)
					for range spread {
						clock.Advance(lim.Period / 100)
						if _, err := sc.Allow(ctx, key, lim); err != nil {
							b.Fatal(err)
						}
					}
					out := strings.TrimSpace(srv.Do(b, "MEMORY", "USAGE", sc.LimitKey(lim, key), "SAMPLES", "0"))
					n, err := strconv.Atoi(out)
					if err != nil {
						b.Fatalf("MEMORY USAGE: %q", out)
					}
					total += n
				}
				b.ReportMetric(float64(total)/float64(b.N), "B/key")
			})
		}
	}
}

// memoryPerKey makes b.N decisions of cost 1 under lim on s, each on a key
// of its own like "user:123456", and reports the mean MEMORY USAGE
// (SAMPLES 0) of the Redis key redisKey names for each as B/key.
func memoryPerKey(b *testing.B, srv *redistest.Server, s sluice.Limiter, lim sluice.Limit, redisKey func(key string) string) {
	b.Helper()
	ctx := context.Background()
	total := 0
	for i := range b.N {
		key := "user:" + strconv.Itoa(100000+i)
		if _, err := s.AllowN(ctx, key, lim, 1); err != nil {
			b.Fatal(err)
		}
		out := strings.TrimSpace(srv.Do(b, "MEMORY", "USAGE", redisKey(key), "SAMPLES", "0"))
		n, err := strconv.Atoi(out)
		if err != nil {
			b.Fatalf("MEMORY USAGE: %q", out)
		}
		total += n
	}
	b.ReportMetric(float64(total)/float64(b.N), "B/key")
}
