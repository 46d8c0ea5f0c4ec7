package algorithm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

func TestSlidingLogSteps(t *testing.T) {
	const ms = time.Millisecond
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 5, Period: time.Second}
	run(t, new(algorithm.SlidingLog), lim, []step{
		{0, 3, ok(2, time.Second)},
		{400 * ms, 2, ok(0, time.Second)},
		// 3 more need the 3 oldest entries (t0) to leave: at t0+1s.
		{500 * ms, 3, no(0, 500*ms, 900*ms)},
		{time.Second - 1, 3, no(0, 1, 400*ms+1)},
		{time.Second, 3, ok(0, time.Second)},
		// Now 1 more needs the entries of t0+400ms to leave.
		{time.Second, 1, no(0, 400*ms, time.Second)},
		{1400 * ms, 2, ok(0, time.Second)},
		{1400 * ms, 5, no(0, time.Second, time.Second)},
		{2400*ms - 1, 5, no(3, 1, 1)},
		{2400 * ms, 5, ok(0, time.Second)},
	})
}

// TestSlidingLogExact shows that the log is exact to the nanosecond: an entry
// at t leaves the window (now−Period, now] at t+Period, not a nanosecond
// earlier, and there is no boundary burst.
func TestSlidingLogExact(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 2, Period: time.Second}
	run(t, new(algorithm.SlidingLog), lim, []step{
		{0, 1, ok(1, time.Second)},
		{1, 1, ok(0, time.Second)},
		{time.Second - 1, 1, no(0, 1, 2)},
		{time.Second, 1, ok(0, time.Second)},
		{time.Second, 1, no(0, 1, time.Second)},
		{time.Second + 1, 1, ok(0, time.Second)},
		{time.Second + 1, 1, no(0, time.Second-1, time.Second)},
	})

	// Where a fixed window admits 2N around a boundary, the log admits N.
	const n = 5
	lim = sluice.Limit{Algorithm: sluice.SlidingLog, Rate: n, Period: time.Minute}
	run(t, new(algorithm.SlidingLog), lim, concat(
		repeat(n, 59*time.Second, 1, func(i int) outcome { return ok(n-1-i, time.Minute) }),
		[]step{
			{time.Minute, 1, no(0, 59*time.Second, 59*time.Second)},
			{119*time.Second - 1, 1, no(0, 1, 1)},
			{119 * time.Second, n, ok(0, time.Minute)},
		},
	))
}

// TestSlidingLogBound checks that the log never admits more than Rate units
// in any half-open window [a, a+Period).
func TestSlidingLogBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim, reqs := drawRun(t, sluice.SlidingLog, 1, 150)
		s := new(algorithm.SlidingLog)
		admitted, _ := play(s, lim, reqs)
		checkWindows(t, lim, admitted, lim.Rate)
		if s.Len() > lim.Rate || s.BufLen() > lim.LogEntries() {
			t.Fatalf("log holds %d units in a ring of %d entries, more than the rate %d", s.Len(), s.BufLen(), lim.Rate)
		}
	})
}

// TestSlidingLogRefundKeepsWindowWithinRate: a refund takes its units from
// the oldest entries, never the newest, so that no window ever holds more
// than Rate of the requests that were admitted and not refunded. A (t0) and
// B (t0+31s) are admitted under 2 per minute; A is refunded at t0+32s. Were
// B's entry removed, A's would leave at t0+60s and C and D would both be
// admitted at t0+60.001s: B, C and D, 3 units, in (t0+30.5s, t0+90.5s].
func TestSlidingLogRefundKeepsWindowWithinRate(t *testing.T) {
	const s = time.Second
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 2, Period: time.Minute}
	c := 60*s + time.Millisecond
	runOps(t, new(algorithm.SlidingLog), lim, []op{
		take(0, 1, ok(1, time.Minute), time.Minute),           // A
		take(31*s, 1, ok(0, time.Minute), 91*s),               // B
		refund(32*s, 1, 91*s),                                 // A's unit: the entry of t0 goes, B's stays
		take(c, 1, ok(0, time.Minute), c+time.Minute),         // C
		take(c, 1, no(0, 91*s-c, time.Minute), c+time.Minute), // D waits for B to leave
		take(91*s, 1, ok(0, time.Minute), 91*s+time.Minute),   // D
	})
}

// TestSlidingLogPrecisionIsConservativeAndBounded: with a Precision the
// log never admits more than Rate in any window, never holds more than
// LogEntries entries (⌈Period/Precision⌉+1 when that is below Rate), and
// refuses only what the exact log admits up to one Precision later: a
// refusal's RetryAfter is at most Precision past the exact log's.
func TestSlidingLogPrecisionIsConservativeAndBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim, reqs := drawRun(t, sluice.SlidingLog, 1, 200)
		lim.Precision = time.Duration(rapid.Int64Range(1, int64(lim.Period)).Draw(t, "precision"))
		s, exact := new(algorithm.SlidingLog), new(algorithm.SlidingLog)
		exactLim := lim
		exactLim.Precision = 0
		var admitted []req
		for i, r := range reqs {
			res := s.Take(r.at, lim, r.cost)
			if res.Allowed {
				admitted = append(admitted, r)
			}
			if n := s.Entries(); n > lim.LogEntries() {
				t.Fatalf("step %d: %d entries, more than LogEntries %d", i, n, lim.LogEntries())
			}
			// The exact log, fed the same admitted requests, admits this
			// one no later than the coarse log does, and not more than a
			// Precision earlier.
			c := exact.Clone()
			if !res.Allowed {
				if er := c.Take(r.at, exactLim, r.cost); !er.Allowed && er.RetryAfter > res.RetryAfter {
					t.Fatalf("step %d: coarse RetryAfter %v before the exact log's %v", i, res.RetryAfter, er.RetryAfter)
				} else if !er.Allowed && res.RetryAfter-er.RetryAfter > lim.Precision {
					t.Fatalf("step %d: coarse RetryAfter %v more than %v past the exact log's %v", i, res.RetryAfter, lim.Precision, er.RetryAfter)
				}
			} else {
				exact.Take(r.at, exactLim, r.cost)
			}
		}
		checkWindows(t, lim, admitted, lim.Rate)
	})
}
