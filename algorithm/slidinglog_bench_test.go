package algorithm_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// BenchmarkSlidingLogWork is one admitted decision on a sliding log of 10,
// 1k or 1M per hour, with requests of cost 1 and of cost Rate, each key
// filled with up to 100 decisions spread over the period; B/key is what the
// log holds on the heap then.
func BenchmarkSlidingLogWork(b *testing.B) {
	for _, rate := range []int{10, 1_000, 1_000_000} {
		for _, cost := range []int{1, rate} {
			b.Run("rate="+strconv.Itoa(rate)+"/cost="+strconv.Itoa(cost), func(b *testing.B) {
				lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: rate, Period: time.Hour}
				calls := min(rate/cost, 100)
				step := int64(lim.Period) / int64(calls)
				var s *algorithm.SlidingLog
				now, i, bytes, keys := t0, 0, 0, 0
				b.ReportAllocs()
				for b.Loop() {
					if i%calls == 0 {
						if s != nil {
							bytes += logBytes(s)
							keys++
						}
						s, now = new(algorithm.SlidingLog), t0
					}
					if !s.Take(now, lim, cost).Allowed {
						b.Fatal("denied")
					}
					now += step
					i++
				}
				if keys > 0 {
					b.ReportMetric(float64(bytes)/float64(keys), "B/key")
				}
			})
		}
	}
}
