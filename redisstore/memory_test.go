package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// BenchmarkMemoryPerKey reports what one key costs Redis (MEMORY USAGE,
// SAMPLES 0) after one decision of cost 1, per algorithm, for a key like
// "user:123456". The sliding log holds one 16-byte entry per distinct
// arrival time in a string, at most its rate (see BenchmarkSlidingLogFull).
func BenchmarkMemoryPerKey(b *testing.B) {
	srv := redistest.Single(b)
	s := open(b, "redis://"+srv.Addr, nil)
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		b.Run(a.String(), func(b *testing.B) {
			lim := sluice.Limit{Algorithm: a, Rate: 100, Period: time.Hour, Burst: 100}
			total := 0
			for i := range b.N {
				key := "user:" + strconv.Itoa(100000+i)
				if _, err := s.Allow(ctx, key, lim); err != nil {
					b.Fatal(err)
				}
				out := strings.TrimSpace(srv.Do(b, "MEMORY", "USAGE", s.Key(a, key), "SAMPLES", "0"))
				n, err := strconv.Atoi(out)
				if err != nil {
					b.Fatalf("MEMORY USAGE: %q", out)
				}
				total += n
			}
			b.ReportMetric(float64(total)/float64(b.N), "B/key")
		})
	}
	// The sliding window with buckets keeps {start, k, k+1 counts}.
	for _, k := range []uint8{2, 4, 8, 16} {
		b.Run("sliding_window_buckets_"+strconv.Itoa(int(k)), func(b *testing.B) {
			lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Hour, Buckets: k}
			total := 0
			for i := range b.N {
				key := "user:" + strconv.Itoa(100000+i)
				if _, err := s.Allow(ctx, key, lim); err != nil {
					b.Fatal(err)
				}
				out := strings.TrimSpace(srv.Do(b, "MEMORY", "USAGE", s.LimitKey(lim, key), "SAMPLES", "0"))
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
