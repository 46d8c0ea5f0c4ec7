package algorithm_test

import (
	"strconv"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// bucketCounts are the numbers of sub-windows measured: 1 is the
// two-window counter (SlidingWindow), the others SlidingBuckets.
var bucketCounts = []uint8{1, 2, 4, 8, 16}

// warmBuckets returns a state of the counter with k sub-windows brought to
// its steady state under hotLimit, that limit and the instant it reached.
func warmBuckets(k uint8) (sluice.Limit, state, int64) {
	lim := hotLimit(sluice.SlidingWindow)
	var s state = new(algorithm.SlidingWindow)
	if k > 1 {
		lim.Buckets, s = k, new(algorithm.SlidingBuckets)
	}
	return lim, s, warmSteady(s, lim)
}

// warmSteady brings s to its steady state under lim, a request of 1 every
// hotStep for twice its rate, and returns the instant it reached.
func warmSteady(s state, lim sluice.Limit) int64 {
	now := t0
	for range 2 * lim.Rate {
		now += hotStep
		s.Take(now, lim, 1)
	}
	return now
}

// BenchmarkTakeBuckets is BenchmarkTake for the sliding window counter with
// 1 to 16 sub-windows: a request every 5 ms at 100/s, about half denied.
func BenchmarkTakeBuckets(b *testing.B) {
	for _, k := range bucketCounts {
		b.Run("buckets="+strconv.Itoa(int(k)), func(b *testing.B) {
			lim, s, now := warmBuckets(k)
			b.ReportAllocs()
			for b.Loop() {
				now += hotStep
				s.Take(now, lim, 1)
			}
		})
	}
}

// TestTakeBucketsAllocs checks that a decision of the bucketed counter
// allocates nothing, denials (and their RetryAfter) and refunds included.
func TestTakeBucketsAllocs(t *testing.T) {
	for _, k := range bucketCounts[1:] {
		lim, s, now := warmBuckets(k)
		if allocs := takeAllocs(lim, s, now); allocs != 0 {
			t.Errorf("buckets %d: Take allocates %v times per call, want 0", k, allocs)
		}
	}
}
