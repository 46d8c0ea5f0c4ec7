package algorithm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// windowBound returns the most units k admits in any half-open window of
// length Period when its clock never goes back: Rate for the sliding log,
// 2·Rate for the windows (a fixed window's boundary, a sliding window's
// estimate), and for the buckets a full bucket plus what drains in a
// period, with one more millisecond's worth for the leaky bucket, whose
// clock counts whole milliseconds.
func windowBound(k kind, lim sluice.Limit) int {
	switch k.alg {
	case sluice.SlidingLog:
		return lim.Rate
	case sluice.TokenBucket:
		return lim.Burst + lim.Rate
	case sluice.LeakyBucket:
		return lim.Burst + 2*lim.Rate
	default:
		return 2 * lim.Rate
	}
}

// TestClockSteppingBackKeepsTheBound: a clock whose readings step back by up
// to one Period, in any pattern, never makes an algorithm admit more than it
// admits under a clock that only goes forward, measured on the max-so-far
// clock (the latest reading seen, the time that has surely passed): a unit
// counted before a step back is not forgotten when the clock returns.
func TestClockSteppingBackKeepsTheBound(t *testing.T) {
	forEachKind(t, func(t *rapid.T, k kind) {
		lim, reqs := drawRunK(t, k, 1, 120)
		p := int64(lim.Period)
		most := rapid.OneOf(rapid.Int64Range(0, 1000), rapid.Int64Range(0, p)).Draw(t, "most")
		backs := rapid.SliceOfN(rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, most)), len(reqs), len(reqs)).Draw(t, "backs")
		s := k.fresh()
		var admitted []req
		latest := reqs[0].at - backs[0]
		for i, r := range reqs {
			read := r.at - backs[i]
			latest = max(latest, read)
			if s.Take(read, lim, r.cost).Allowed {
				admitted = append(admitted, req{latest, r.cost})
			}
		}
		checkWindows(t, lim, admitted, windowBound(k, lim))
	})
}

// TestSlidingWindowClockBackAcrossABoundaryForgetsNothing is the review's
// case at 100/s: 100 admitted in the last half second of a window; a
// reading 300 ns into the next window rolls it, the next reading steps back
// 300 ns before the boundary, and a reading 1 µs after it rolls again. The
// 100 must still weigh fully on every reading: none more is admitted.
func TestSlidingWindowClockBackAcrossABoundaryForgetsNothing(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Second}
	w := t0 + int64(time.Second)
	var s algorithm.SlidingWindow
	if res := s.Take(w-int64(500*time.Millisecond), lim, 100); !res.Allowed {
		t.Fatalf("100 of 100 at W−0.5s: %+v, want admitted", res)
	}
	if res := s.Take(w+300, lim, 1); !res.Allowed {
		t.Fatalf("AllowN(W+300 ns, 1) over 100 weighing 99: %+v, want admitted", res)
	}
	for i, at := range []int64{w - 300, w + 1000, w - 300, w + int64(time.Millisecond)} {
		if res := s.Take(at, lim, 1); res.Allowed {
			t.Fatalf("step %d: AllowN(W%+d ns, 1) admitted over 100 of 100 spent 0.5 s before: %+v", i, at-w, res)
		}
	}
}

// TestFixedWindowClockBackKeepsTheWindow: a reading before the current
// window's start, after the clock stepped back over the boundary, counts in
// the current window; the previous window's count is not forgotten either,
// and when the clock comes back the window does not start afresh.
func TestFixedWindowClockBackKeepsTheWindow(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Second}
	w := t0 + int64(time.Second)
	var s algorithm.FixedWindow
	run := func(at int64, cost int, want bool) {
		t.Helper()
		if res := s.Take(at, lim, cost); res.Allowed != want {
			t.Fatalf("AllowN(W%+d ns, %d) = %+v, want allowed %v", at-w, cost, res, want)
		}
	}
	run(w-int64(100*time.Millisecond), 10, true) // the old window full
	run(w+300, 4, true)                          // a new window: 4 of 10
	run(w-300, 6, true)                          // back: counts in the new window, 10 of 10
	run(w-300, 1, false)
	run(w+1000, 1, false) // forward again: still the same window, full
	run(w+int64(time.Second), 10, true)
}

// TestFixedWindowRefundAfterClockBackGivesBackInTheWindow: a refund read
// up to a period before the current window's start gives back to that
// window, where Take counts such a reading; one read further back gives
// nothing back, since no window that holds it took the units.
func TestFixedWindowRefundAfterClockBackGivesBackInTheWindow(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Second}
	w := t0 + int64(time.Second)
	var s algorithm.FixedWindow
	if res := s.Take(w+300, lim, 10); !res.Allowed {
		t.Fatalf("10 of 10 at W+300 ns: %+v, want admitted", res)
	}
	s.Refund(w-300, lim, 1) // back 600 ns: the current window's
	if res := s.Take(w+1000, lim, 1); !res.Allowed {
		t.Fatalf("after a refund read 300 ns before W: AllowN(W+1 µs, 1) = %+v, want admitted", res)
	}
	s.Refund(w-int64(1500*time.Millisecond), lim, 1) // back more than a period
	if res := s.Take(w+2000, lim, 1); res.Allowed {
		t.Fatalf("after a refund read 1.5 s before W: AllowN(W+2 µs, 1) = %+v, want refused (10 of 10)", res)
	}
}

// TestSlidingBucketsClockBackKeepsTheSubWindow: a reading before the
// current sub-window's start counts in it, so units counted there do not
// move back in time and leave the period early when the clock returns.
func TestSlidingBucketsClockBackKeepsTheSubWindow(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Second, Buckets: 4}
	var s algorithm.SlidingBuckets
	g := int64(250 * time.Millisecond)
	if res := s.Take(t0+g, lim, 10); !res.Allowed { // sub-window 1 full
		t.Fatalf("10 of 10: %+v", res)
	}
	s.Take(t0+g-1, lim, 0) // a step back into sub-window 0
	// At t0+1.2 s, sub-window 1 still lies wholly in the last second
	// (oldest is sub-window 0): nothing fits.
	if res := s.Take(t0+int64(1200*time.Millisecond), lim, 1); res.Allowed {
		t.Fatalf("AllowN(t0+1.2s, 1) admitted 0.95 s after 10 of 10: %+v", res)
	}
}
