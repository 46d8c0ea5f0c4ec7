package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
)

var agreeKey atomic.Int64

// pair returns a store on the package's redis-server and a memory store
// that sweeps nothing, both on clock, for tests that compare their answers.
func pair(t *testing.T, clock sluice.Clock) (*redisstore.Store, *memstore.Store) {
	t.Helper()
	ms := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { ms.Close() })
	return open(t, singleURL(t), clock), ms
}

// agree plays random sequences of requests and refunds under the limits
// drawLimit draws, with costs up to the capacity, on the Redis store and on
// the memory store at the same instants, and checks that every Result is
// the same, durations within slack. One step in ten moves the clock back.
//
// A key's time to live runs on Redis's clock, not the test's, so every time
// to live the script sets must outlast the real time between two calls:
// instants are whole seconds, and with settle, whenever a key's state would
// be fresh again within 2 s (ResetAfter; after a refund, a request of cost 1
// tells), the clock moves past that, so both stores' states are fresh. Until
// the next request, the clock then never steps back before that instant:
// Redis has dropped the key, while the memory store (which sweeps nothing
// here) still holds the state, which is not fresh at an earlier instant.
func agree(t *testing.T, drawLimit func(t *rapid.T) sluice.Limit, slack time.Duration, settle bool) {
	clock := clocktest.New()
	rs, ms := pair(t, clock)
	ctx := context.Background()
	near := func(a, b time.Duration) bool { return a-b <= slack && b-a <= slack }
	rapid.Check(t, func(t *rapid.T) {
		lim := drawLimit(t)
		key := "agree:" + strconv.FormatInt(agreeKey.Add(1), 10)
		var settled time.Time // the instant of the last settling, if any
		clock.Set(clocktest.Epoch.Add(time.Duration(rapid.Int64Range(0, 1e6).Draw(t, "start")) * time.Second))
		take := func(i, cost int) {
			got, err := rs.AllowN(ctx, key, lim, cost)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ms.AllowN(ctx, key, lim, cost)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed != want.Allowed || got.Remaining != want.Remaining ||
				!near(got.RetryAfter, want.RetryAfter) || !near(got.ResetAfter, want.ResetAfter) {
				t.Fatalf("%v step %d at %v: AllowN(%d) = %+v on Redis, %+v in memory", lim, i, clock.Now(), cost, got, want)
			}
			if settle && want.ResetAfter < 2*time.Second {
				clock.Advance(want.ResetAfter.Truncate(time.Second) + time.Second)
				settled = clock.Now()
			} else {
				settled = time.Time{} // both stores hold this state, for 2 s or more
			}
		}
		p := int64(lim.Period / time.Second)
		for i := range rapid.IntRange(1, 40).Draw(t, "steps") {
			gap := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, p/int64(lim.Rate)*2+1), rapid.Int64Range(0, 2*p)).Draw(t, "gap")
			// Stay within 50 years of the epoch: windows of up to a century,
			// aligned to 1970, then end well inside int64 nanoseconds.
			gap = min(gap, int64(clocktest.Epoch.Add(50*365*24*time.Hour).Sub(clock.Now())/time.Second))
			if rapid.IntRange(0, 9).Draw(t, "back") == 0 {
				gap = -gap // the clock steps back
				if !settled.IsZero() {
					gap = max(gap, -int64(clock.Now().Sub(settled)/time.Second))
				}
			}
			clock.Advance(time.Duration(gap) * time.Second)
			cost := rapid.OneOf(rapid.Just(1), rapid.IntRange(1, lim.Capacity())).Draw(t, "cost")
			if rapid.IntRange(0, 5).Draw(t, "refund") != 0 {
				take(i, cost)
				continue
			}
			if err := rs.RefundN(ctx, key, lim, cost); err != nil {
				t.Fatal(err)
			}
			if err := ms.RefundN(ctx, key, lim, cost); err != nil {
				t.Fatal(err)
			}
			if settle {
				take(i, 1)
			}
		}
	})
}

// TestSlidingLogAgreesWithMemstore: the script keeps the log as
// algorithm.SlidingLog does, for rates up to sluice.MaxLogRate and costs up
// to the rate, exact or with a Precision of whole milliseconds, so that
// the two stores cut time into the same slots.
func TestSlidingLogAgreesWithMemstore(t *testing.T) {
	agree(t, func(t *rapid.T) sluice.Limit {
		lim := sluice.Limit{
			Algorithm: sluice.SlidingLog,
			Rate:      rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, sluice.MaxLogRate)).Draw(t, "rate"),
			Period:    time.Duration(rapid.Int64Range(1, 1000).Draw(t, "period-slots")) * 64 * time.Second,
		}
		if rapid.Bool().Draw(t, "precise") {
			lim.Precision = time.Duration(rapid.Int64Range(1, int64(lim.Period/time.Millisecond)).Draw(t, "precision-ms")) * time.Millisecond
		}
		return lim
	}, 0, false)
}

// TestSlidingWindowAgreesWithMemstore: the script's weighting and waits stay
// exact for rates and periods whose products pass 2^53 microseconds, up to
// sluice.MaxRate and sluice.MaxPeriod. A wait computed in microseconds may
// differ from one in nanoseconds by under a microsecond.
func TestSlidingWindowAgreesWithMemstore(t *testing.T) {
	agree(t, func(t *rapid.T) sluice.Limit {
		lim := sluice.Limit{
			Algorithm:     sluice.SlidingWindow,
			Rate:          rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, sluice.MaxRate)).Draw(t, "rate"),
			Period:        time.Duration(rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(1, int64(sluice.MaxPeriod/time.Second))).Draw(t, "period")) * time.Second,
			CountRejected: rapid.Bool().Draw(t, "count-rejected"),
		}
		if lim.CountRejected {
			// Rejected units are counted up to 2^53 on Redis, 2^60 in
			// memory: 40 steps of 2^47 stay below both.
			lim.Rate = min(lim.Rate, 1<<47)
		}
		return lim
	}, time.Microsecond, false)
}

// TestFixedWindowAgreesWithMemstore: fixed_window.lua keeps the window as
// algorithm.FixedWindow does through refunds and the clock stepping back:
// a step back of up to a period stays in a window that counts anything.
func TestFixedWindowAgreesWithMemstore(t *testing.T) {
	agree(t, func(t *rapid.T) sluice.Limit {
		return sluice.Limit{
			Algorithm: sluice.FixedWindow,
			Rate:      rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, sluice.MaxRate)).Draw(t, "rate"),
			Period:    time.Duration(rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(1, int64(sluice.MaxPeriod/time.Second))).Draw(t, "period")) * time.Second,
		}
	}, 0, false)
}

// TestCalendarWindowAgreesWithMemstore: calendar_window.lua picks the
// period as algorithm.FixedWindow does for a calendar (a Berlin day or
// month), through refunds and the clock stepping back into the period
// before.
func TestCalendarWindowAgreesWithMemstore(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	agree(t, func(t *rapid.T) sluice.Limit {
		unit := rapid.SampledFrom([]sluice.CalendarUnit{sluice.CalendarDay, sluice.CalendarMonth}).Draw(t, "unit")
		return sluice.PerCalendar(rapid.IntRange(1, 100).Draw(t, "rate"), sluice.Calendar{Location: loc, Unit: unit})
	}, 0, false)
}

// TestSlidingBucketsAgreesWithMemstore: sliding_buckets.lua keeps the
// sub-windows as algorithm.SlidingBuckets does, through refunds, the clock
// stepping back and rejected units counted, for rates up to
// sluice.MaxBucketRate and 2 to 16 buckets.
func TestSlidingBucketsAgreesWithMemstore(t *testing.T) {
	agree(t, func(t *rapid.T) sluice.Limit {
		k := rapid.IntRange(2, sluice.MaxBuckets).Draw(t, "buckets")
		return sluice.Limit{
			Algorithm:     sluice.SlidingWindow,
			Buckets:       uint8(k),
			Rate:          rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, sluice.MaxBucketRate)).Draw(t, "rate"),
			Period:        time.Duration(k) * time.Duration(rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(1, int64(sluice.MaxPeriod/time.Second)/16)).Draw(t, "period")) * time.Second,
			CountRejected: rapid.Bool().Draw(t, "count-rejected"),
		}
	}, time.Microsecond, false)
}

// TestSlidingMomentsAgreesWithMemstore: sliding_moments.lua computes
// algorithm.SlidingMoments's estimate in the same integers, through
// refunds, the clock stepping back and rejected units counted: decision
// for decision and Remaining for Remaining, waits within a microsecond,
// for 1 to 16 sub-windows, 1 to 8 moments and rates up to
// sluice.MaxMomentsRate.
func TestSlidingMomentsAgreesWithMemstore(t *testing.T) {
	agree(t, func(t *rapid.T) sluice.Limit {
		k := rapid.IntRange(1, sluice.MaxBuckets).Draw(t, "buckets")
		return sluice.Limit{
			Algorithm:     sluice.SlidingWindow,
			Buckets:       uint8(k),
			Moments:       uint8(rapid.IntRange(1, sluice.MaxMoments).Draw(t, "moments")),
			Rate:          rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, sluice.MaxMomentsRate)).Draw(t, "rate"),
			Period:        time.Duration(k) * time.Duration(rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(1, int64(sluice.MaxPeriod/time.Second)/16)).Draw(t, "period")) * time.Second,
			CountRejected: rapid.Bool().Draw(t, "count-rejected"),
		}
	}, time.Microsecond, false)
}

// TestTokenBucketAgreesWithMemstore: the script keeps the theoretical
// arrival time in nanoseconds, with the memory store's interval, whenever
// 2·Burst·Interval stays below 2^53 ns (refills of up to 52 days), including
// rates finer than one unit per microsecond; beyond, in microseconds, which
// agree when the interval is a whole number of them.
func TestTokenBucketAgreesWithMemstore(t *testing.T) {
	agree(t, func(t *rapid.T) sluice.Limit {
		lim := sluice.Limit{
			Algorithm: sluice.TokenBucket,
			Rate:      rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, 1e9)).Draw(t, "rate"),
			Period:    time.Duration(rapid.OneOf(rapid.Int64Range(1, 100), rapid.Int64Range(1, 1e7)).Draw(t, "period")) * time.Second,
			Burst:     rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, sluice.MaxRate)).Draw(t, "burst"),
		}
		if lim.Validate() != nil {
			t.Skip("not a valid limit")
		}
		if i := algorithm.Interval(lim); int64(lim.Burst) > (1<<52)/i && i%1000 != 0 {
			t.Skip("kept in microseconds, and the interval is not a whole number of them")
		}
		if redisstore.ValidateLimit(lim) != nil {
			t.Skip("refused by the Redis store")
		}
		return lim
	}, time.Microsecond, true)
}

// TestLayoutFlipsAgreeWithMemstore: a key decided now under moments, now
// under the two-window counter (two processes with different configs for
// one rule), moves between the layouts alike in both stores: each seeds
// the other's state with the estimate at now (sliding_window.lua's
// momentsEstimate and algorithm.SlidingMoments.Estimate, the counter's
// Estimate the other way), decision for decision and Remaining for
// Remaining, through the clock stepping back.
func TestLayoutFlipsAgreeWithMemstore(t *testing.T) {
	clock := clocktest.New()
	rs, ms := pair(t, clock)
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, sluice.MaxBuckets).Draw(t, "buckets")
		moments := sluice.Limit{
			Algorithm: sluice.SlidingWindow,
			Buckets:   uint8(k),
			Moments:   uint8(rapid.IntRange(1, sluice.MaxMoments).Draw(t, "moments")),
			Rate:      rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, sluice.MaxMomentsRate)).Draw(t, "rate"),
			Period:    time.Duration(k) * time.Duration(rapid.Int64Range(1, 100).Draw(t, "period")) * time.Second,
		}
		counter := moments
		counter.Buckets, counter.Moments = 0, 0
		key := "agree:" + strconv.FormatInt(agreeKey.Add(1), 10)
		clock.Set(clocktest.Epoch.Add(time.Duration(rapid.Int64Range(0, 1e6).Draw(t, "start")) * time.Second))
		p := int64(moments.Period / time.Second)
		for i := range rapid.IntRange(1, 40).Draw(t, "steps") {
			gap := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, p/int64(moments.Rate)*2+1), rapid.Int64Range(0, 2*p)).Draw(t, "gap")
			if rapid.IntRange(0, 9).Draw(t, "back") == 0 {
				gap = -gap
			}
			clock.Advance(time.Duration(gap) * time.Second)
			lim := moments
			if rapid.Bool().Draw(t, "counter") {
				lim = counter
			}
			cost := rapid.OneOf(rapid.Just(1), rapid.IntRange(1, moments.Rate)).Draw(t, "cost")
			got, err := rs.AllowN(ctx, key, lim, cost)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ms.AllowN(ctx, key, lim, cost)
			if err != nil {
				t.Fatal(err)
			}
			if got.Allowed != want.Allowed || got.Remaining != want.Remaining {
				t.Fatalf("%v step %d at %v: AllowN(%d) = %+v on Redis, %+v in memory", lim, i, clock.Now(), cost, got, want)
			}
		}
	})
}
