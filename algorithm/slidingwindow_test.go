package algorithm_test

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// TestSlidingWindowEstimate is the documented example: 50/min with 42 in the
// previous minute and 18 in this one, 15 s in: 42·45/60 + 18 = 49.5, floor
// 49, so one more is admitted and then none.
func TestSlidingWindowEstimate(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 50, Period: time.Minute}
	const retry = 714285715 // ⌊42·(60s−e)/60s⌋ ≤ 30 from e = 15.714285715 s
	run(t, new(algorithm.SlidingWindow), lim, []step{
		{10 * time.Second, 42, ok(8, 110*time.Second)},
		// 13 s into the next minute: ⌊42·47/60⌋ = 32, and 32+18 = 50.
		{73 * time.Second, 18, ok(0, 107*time.Second)},
		// 15 s in: ⌊31.5⌋ + 18 = 49, one more fits.
		{75 * time.Second, 1, ok(0, 105*time.Second)},
		{75 * time.Second, 1, no(0, retry, 105*time.Second)},
		{75*time.Second + retry - 1, 1, no(0, 1, 105*time.Second-retry+1)},
		{75*time.Second + retry, 1, ok(0, 105*time.Second-retry)},
	})

	// The same state built directly.
	s := &algorithm.SlidingWindow{Start: t0 + int64(time.Minute), Prev: 42, Curr: 18, Until: t0 + 3*int64(time.Minute)}
	run(t, s, lim, []step{
		{75 * time.Second, 1, ok(0, 105*time.Second)},
		{75 * time.Second, 1, no(0, retry, 105*time.Second)},
	})
}

// TestSlidingWindowTen is 100/min with 80 at 30 s and 30 at 70 s: at 75 s the
// estimate is ⌊80·45/60⌋ + 30 = 90, so exactly 10 more are admitted, and the
// 11th may retry a nanosecond later, when ⌊80·(45s−1ns)/60s⌋ = 59.
func TestSlidingWindowTen(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute}
	steps := concat(
		repeat(80, 30*time.Second, 1, func(i int) outcome { return ok(99-i, 90*time.Second) }),
		// ⌊80·50/60⌋ = 66.
		repeat(30, 70*time.Second, 1, func(i int) outcome { return ok(33-i, 110*time.Second) }),
		repeat(10, 75*time.Second, 1, func(i int) outcome { return ok(9-i, 105*time.Second) }),
		[]step{
			{75 * time.Second, 1, no(0, 1, 105*time.Second)},
			{75*time.Second + 1, 1, ok(0, 105*time.Second-1)},
			// ⌊80·(60s−e)/60s⌋ ≤ 58 from e = 15.75 s.
			{75*time.Second + 1, 1, no(0, 750*time.Millisecond, 105*time.Second-1)},
		},
	)
	run(t, new(algorithm.SlidingWindow), lim, steps)

	s := new(algorithm.SlidingWindow)
	admitted := 0
	for _, st := range steps[:121] {
		if r := s.Take(t0+int64(st.at), lim, st.cost); r.Allowed && st.at == 75*time.Second {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("admitted %d at t0+75s, want exactly 10", admitted)
	}
}

func TestSlidingWindowCost(t *testing.T) {
	const ms = time.Millisecond
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Second}
	run(t, new(algorithm.SlidingWindow), lim, []step{
		{500 * ms, 6, ok(4, 1500*ms)},
		// 6+5 > 10 in this window; in the next, ⌊6·(1s−e)/1s⌋ ≤ 5 from e = 1ns.
		{500 * ms, 5, no(4, 500*ms+1, 1500*ms)},
		{time.Second, 5, no(4, 1, time.Second)},
		{time.Second + 1, 5, ok(0, 2*time.Second-1)},
		// ⌊6·0.5⌋ + 5 + 3 = 11; ⌊6·(0.5s−1ns)/1s⌋ = 2 fits.
		{1500 * ms, 3, no(2, 1, 1500*ms)},
		{1500*ms + 1, 3, ok(0, 1500*ms-1)},
		// A whole-rate request waits for the next window, where
		// ⌊8·(1s−e)/1s⌋ = 0 from e = 875ms+1ns.
		{1500*ms + 1, 10, no(0, 1375*ms, 1500*ms-1)},
		{2875 * ms, 10, no(9, 1, 125*ms)},
		{2875*ms + 1, 10, ok(0, 1125*ms-1)},
	})
}

// TestSlidingWindowBound checks that the sliding window counter never admits
// more than 2·Rate in any window of length Period.
func TestSlidingWindowBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim, reqs := drawRun(t, sluice.SlidingWindow, 1, 150)
		admitted, _ := play(new(algorithm.SlidingWindow), lim, reqs)
		checkWindows(t, lim, admitted, 2*lim.Rate)
	})
}

// swRef is a straightforward sliding window counter: it remembers every
// counted request and recomputes the counts of the current and previous
// aligned windows at each decision.
type swRef struct {
	counted []req
}

// take decides cost at now under lim and returns whether it is admitted and
// the estimate Remaining.
func (r *swRef) take(now int64, lim sluice.Limit, cost int) (allowed bool, remaining int) {
	p := int64(lim.Period)
	w := floorDiv(now, p) * p
	var prev, curr int64
	for _, c := range r.counted {
		switch {
		case c.at >= w-p && c.at < w:
			prev += int64(c.cost)
		case c.at >= w && c.at <= now:
			curr += int64(c.cost)
		}
	}
	e := now - w
	weighted := prev * (p - e) / p // prev ≤ 40·20, p−e ≤ 1e10: no overflow
	allowed = weighted+curr+int64(cost) <= int64(lim.Rate)
	if allowed || lim.CountRejected {
		r.counted = append(r.counted, req{now, cost})
		curr += int64(cost)
	}
	return allowed, int(max(int64(lim.Rate)-weighted-curr, 0))
}

// TestSlidingWindowReference checks the counter's decisions and Remaining
// against swRef, step by step: admitted iff ⌊prev·(P−e)/P⌋ + curr + c ≤ Rate.
// With CountRejected every request counts, admitted or not, and the
// reference never caps its counts, so no cap in the code may change a
// decision.
func TestSlidingWindowReference(t *testing.T) {
	for _, countRejected := range []bool{false, true} {
		t.Run(fmt.Sprintf("count-rejected=%v", countRejected), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				lim := drawLimitCR(t, sluice.SlidingWindow, countRejected)
				reqs := drawRequests(t, lim, drawStart(t, lim), 1, 150)
				s, ref := new(algorithm.SlidingWindow), new(swRef)
				for i, r := range reqs {
					res := s.Take(r.at, lim, r.cost)
					allowed, remaining := ref.take(r.at, lim, r.cost)
					if res.Allowed != allowed || res.Remaining != remaining {
						t.Fatalf("%v step %d: AllowN%v = allowed %v remaining %d, reference says %v, %d",
							lim, i, r, res.Allowed, res.Remaining, allowed, remaining)
					}
				}
			})
		})
	}
}

// TestSlidingWindowCountRejected: with CountRejected every request counts,
// admitted or not, and RetryAfter is the time until a request fits given the
// rejected one just counted. No cap on the count may change a decision:
// steps 4 and 5 fail if the count is capped at 2·Rate.
func TestSlidingWindowCountRejected(t *testing.T) {
	const ms = time.Millisecond
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 2, Period: time.Second, CountRejected: true}
	run(t, new(algorithm.SlidingWindow), lim, []step{
		{0, 1, ok(1, 2*time.Second)},
		{0, 1, ok(0, 2*time.Second)},
		// 3 counted: next window, ⌊3·(1s−e)/1s⌋ ≤ 1 from e = 333333334ns.
		{0, 1, no(0, time.Second+333333334, 2*time.Second)},
		// 4 counted: from e = 500ms+1ns.
		{0, 1, no(0, 1500*ms+1, 2*time.Second)},
		// 5 counted: from e = 600ms+1ns.
		{0, 1, no(0, 1600*ms+1, 2*time.Second)},
		// ⌊5·0.45⌋ = 2: denied (and counted); ⌊5·(0.2s−1ns)/1s⌋ = 0 from e = 800ms+1ns.
		{1550 * ms, 1, no(0, 250*ms+1, 1450*ms)},
		{1800*ms + 1, 1, ok(0, 1200*ms-1)},
	})
}

// Estimate reads what Take compares with the rate, without spending or
// moving the state: 6 units 50 s into a minute and 5 more 10 s into the
// next count ⌊6·50/60⌋ + 5 = 10, then ⌊6·20/60⌋ + 5 = 7 at 40 s,
// ⌊5·30/60⌋ = 2 halfway through the minute after, and nothing after it.
func TestSlidingWindowEstimateIsWhatTakeCounts(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute}
	var s algorithm.SlidingWindow
	m := int64(time.Minute)
	s.Take(50*int64(time.Second), lim, 6)
	s.Take(m+10*int64(time.Second), lim, 5)
	before := s
	for _, c := range []struct{ at, want int64 }{
		{m + 10*int64(time.Second), 10},
		{m + 40*int64(time.Second), 7},
		{2*m + 30*int64(time.Second), 2},
		{3*m + 1, 0},
	} {
		if got := s.Estimate(c.at, lim); got != c.want {
			t.Errorf("Estimate(%v) = %d, want %d", time.Duration(c.at), got, c.want)
		}
	}
	if s != before {
		t.Errorf("Estimate changed the state: %+v, was %+v", s, before)
	}
}
