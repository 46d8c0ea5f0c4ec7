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

// BenchmarkSlidingLogFull is one decision on a full exact log of 64, 1000
// or 100,000 per hour: the key holds Rate entries of cost 1, one every
// Period/Rate. "steady" decides at the next step, so that the oldest entry
// leaves and the request is admitted (the log stays full); "refused" asks
// again at the same instant, refused with the wait to the oldest entry's
// leaving (a binary search). B/key is the state and its ring.
func BenchmarkSlidingLogFull(b *testing.B) {
	for _, rate := range []int{64, 1_000, 100_000} {
		lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: rate, Period: time.Hour}
		step := int64(lim.Period) / int64(rate)
		fill := func(b *testing.B) (*algorithm.SlidingLog, int64) {
			s, now := new(algorithm.SlidingLog), t0
			for range rate {
				if !s.Take(now, lim, 1).Allowed {
					b.Fatal("denied while filling")
				}
				now += step
			}
			return s, now
		}
		b.Run("rate="+strconv.Itoa(rate)+"/steady", func(b *testing.B) {
			s, now := fill(b)
			b.ReportAllocs()
			for b.Loop() {
				if !s.Take(now, lim, 1).Allowed {
					b.Fatal("denied")
				}
				now += step
			}
			b.ReportMetric(float64(48+logBytes(s)), "B/key")
		})
		b.Run("rate="+strconv.Itoa(rate)+"/refused", func(b *testing.B) {
			s, now := fill(b)
			now -= step // the newest entry's instant: the log is full
			b.ReportAllocs()
			for b.Loop() {
				if s.Take(now, lim, 1).Allowed {
					b.Fatal("admitted")
				}
			}
			b.ReportMetric(float64(48+logBytes(s)), "B/key")
		})
	}
}
