package algorithm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
)

// TestExtremeLimits draws limits from the whole range Validate accepts, with
// rates, bursts and periods at their bounds, costs up to the capacity, and
// instants that jump forwards and back, and checks that no algorithm panics
// or reports a negative Remaining, RetryAfter or ResetAfter, and that a
// denial never spends.
func TestExtremeLimits(t *testing.T) {
	edge := func(t *rapid.T, name string, lo, hi int64) int64 {
		return rapid.OneOf(
			rapid.Just(lo), rapid.Just(hi), rapid.Just(max(hi-1, lo)), rapid.Just(min(lo+1, hi)),
			rapid.Int64Range(lo, hi),
		).Draw(t, name)
	}
	forEachKind(t, func(t *rapid.T, k kind) {
		lim := sluice.Limit{
			Algorithm: k.alg,
			Rate:      int(edge(t, "rate", 1, sluice.MaxRate)),
			Period:    time.Duration(edge(t, "period", 1, int64(sluice.MaxPeriod))),
			Burst:     int(edge(t, "burst", 1, sluice.MaxRate)),
		}
		if k.alg == sluice.SlidingLog {
			lim.Rate = min(lim.Rate, sluice.MaxLogRate)
		}
		lim = k.with(lim)
		if lim.Validate() != nil {
			t.Skip("not a valid limit")
		}
		s := k.fresh()
		now := edge(t, "start", 0, 1<<62)
		for i := range rapid.IntRange(1, 20).Draw(t, "steps") {
			// Instants stay within [0, 2^62]: Unix nanoseconds until the year 2116.
			now = min(max(now+rapid.Int64Range(-int64(time.Hour), int64(sluice.MaxPeriod)).Draw(t, "step"), 0), 1<<62)
			cost := int(edge(t, "cost", 1, int64(lim.Capacity())))
			before := k.clone(s)
			res := s.Take(now, lim, cost)
			if res.Remaining < 0 || res.RetryAfter < 0 || res.ResetAfter < 0 {
				t.Fatalf("%v step %d: Take(%d, %d) = %+v: a negative field", lim, i, now, cost, res)
			}
			if !res.Allowed && res.RetryAfter == 0 {
				t.Fatalf("%v step %d: denied with RetryAfter 0", lim, i)
			}
			if !res.Allowed && k.alg != sluice.SlidingWindow && k.alg != sluice.FixedWindow {
				// A denial spends nothing (the windows may only roll over).
				if got, want := k.clone(s).Take(now, lim, cost), before.Take(now, lim, cost); got != want {
					t.Fatalf("%v step %d: a denial changed the state: %+v then %+v", lim, i, want, got)
				}
			}
			if rapid.Bool().Draw(t, "refund") {
				s.Refund(now, lim, rapid.IntRange(1, lim.Capacity()).Draw(t, "refund-cost"))
			}
		}
	})
}
