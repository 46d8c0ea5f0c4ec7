package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
)

// TestServesLargeLimits: limits that pass sluice.Limit.Validate, and so
// `sluice check`, are served on Redis as in memory, not refused on every
// call: a sliding window of 100,000 per day or 1,000 per year (whose
// weighting prev·(P−elapsed) passes 2^53 in microseconds), a token bucket of
// 2,000,000 per second (one unit every 500 ns, finer than Redis's
// microsecond clock).
func TestServesLargeLimits(t *testing.T) {
	s := open(t, singleURL(t), nil)
	ctx := context.Background()
	day, year := 24*time.Hour, 365*24*time.Hour
	for _, lim := range []sluice.Limit{
		{Algorithm: sluice.SlidingWindow, Rate: 100_000, Period: day},
		{Algorithm: sluice.SlidingWindow, Rate: 1000, Period: year},
		{Algorithm: sluice.SlidingWindow, Rate: sluice.MaxRate, Period: sluice.MaxPeriod, CountRejected: true},
		{Algorithm: sluice.TokenBucket, Rate: 2_000_000, Period: time.Second, Burst: 2_000_000},
		{Algorithm: sluice.TokenBucket, Rate: 1_000_000_000, Period: time.Second, Burst: 1},
	} {
		key := "large:" + lim.String() + ":" + time.Now().String()
		for i := range 3 {
			r, err := s.AllowN(ctx, key, lim, 1)
			if err != nil {
				t.Fatalf("%v: AllowN #%d: %v", lim, i+1, err)
			}
			if !r.Allowed && lim.Burst != 1 {
				t.Fatalf("%v: AllowN #%d = %+v, want admitted", lim, i+1, r)
			}
		}
	}
}

// TestValidateLimitCoversEveryRefusal draws limits from the whole range
// sluice.Limit.Validate accepts, every algorithm, rates, bursts and periods
// at their bounds, and costs up to the capacity: when ValidateLimit accepts
// a limit, no call on Redis returns an error; when it refuses one, every
// call does, with the same error. So a configuration that ValidateLimit
// passes never fails per request.
func TestValidateLimitCoversEveryRefusal(t *testing.T) {
	s := open(t, singleURL(t), nil)
	ctx := context.Background()
	edge := func(t *rapid.T, name string, lo, hi int64) int64 {
		return rapid.OneOf(
			rapid.Just(lo), rapid.Just(hi), rapid.Just(max(hi-1, lo)), rapid.Just(min(lo+1, hi)),
			rapid.Int64Range(lo, hi), rapid.Int64Range(lo, min(hi, 1000)),
		).Draw(t, name)
	}
	var served, refused atomic.Int64
	rapid.Check(t, func(t *rapid.T) {
		lim := sluice.Limit{
			Algorithm: rapid.SampledFrom(sluice.Algorithms()).Draw(t, "algorithm"),
			Rate:      int(edge(t, "rate", 1, sluice.MaxRate)),
			Period: time.Duration(rapid.OneOf(
				rapid.Int64Range(1, int64(sluice.MaxPeriod)),
				rapid.Map(rapid.Int64Range(1, int64(sluice.MaxPeriod/time.Microsecond)), func(us int64) int64 { return us * 1000 }),
				rapid.SampledFrom([]int64{int64(time.Second), int64(time.Hour), int64(24 * time.Hour), int64(365 * 24 * time.Hour), int64(sluice.MaxPeriod)}),
			).Draw(t, "period")),
			Burst: int(edge(t, "burst", 1, sluice.MaxRate)),
		}
		if lim.Algorithm == sluice.SlidingLog {
			lim.Rate = min(lim.Rate, sluice.MaxLogRate)
		}
		lim.CountRejected = lim.Algorithm == sluice.SlidingWindow && rapid.Bool().Draw(t, "count-rejected")
		if lim.Validate() != nil {
			t.Skip("not a valid limit")
		}
		verdict := redisstore.ValidateLimit(lim)
		if verdict != nil {
			refused.Add(1)
			if !errors.Is(verdict, sluice.ErrInvalidLimit) {
				t.Fatalf("ValidateLimit(%v) = %v, want an error wrapping %v", lim, verdict, sluice.ErrInvalidLimit)
			}
		} else {
			served.Add(1)
		}
		key := "validate:" + strconv.FormatInt(agreeKey.Add(1), 10)
		for i := range rapid.IntRange(1, 6).Draw(t, "calls") {
			cost := int(edge(t, "cost", 1, int64(lim.Capacity())))
			var err error
			if rapid.IntRange(0, 3).Draw(t, "refund") == 0 {
				err = s.RefundN(ctx, key, lim, cost)
			} else {
				_, err = s.AllowN(ctx, key, lim, cost)
			}
			switch {
			case verdict == nil && err != nil:
				t.Fatalf("%v: ValidateLimit accepts it, but call %d of cost %d fails: %v", lim, i, cost, err)
			case verdict != nil && (err == nil || err.Error() != verdict.Error()):
				t.Fatalf("%v: ValidateLimit refuses it (%v), but call %d of cost %d returns %v", lim, verdict, i, cost, err)
			}
		}
	})
	t.Logf("%d limits served, %d refused", served.Load(), refused.Load())
}
