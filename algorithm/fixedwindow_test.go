package algorithm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

func TestFixedWindowSteps(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Minute}
	run(t, new(algorithm.FixedWindow), lim, []step{
		// 20 s into the window: ResetAfter 40s.
		{20 * time.Second, 1, ok(99, 40*time.Second)},
		{59 * time.Second, 99, ok(0, time.Second)},
		{59 * time.Second, 1, no(0, time.Second, time.Second)},
		{60 * time.Second, 100, ok(0, time.Minute)},
	})
}

// TestFixedWindowBoundary shows the documented flaw: N at the end of one
// window and N at the start of the next, 2N within one second of a 1-minute
// limit, and a denial's RetryAfter is the time to the boundary.
func TestFixedWindowBoundary(t *testing.T) {
	const n = 5
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: n, Period: time.Minute}
	s := new(algorithm.FixedWindow)
	steps := concat(
		repeat(n, 59*time.Second, 1, func(i int) outcome { return ok(n-1-i, time.Second) }),
		[]step{
			{59500 * time.Millisecond, 1, no(0, 500*time.Millisecond, 500*time.Millisecond)},
			{time.Minute - 1, 1, no(0, 1, 1)},
		},
		repeat(n, time.Minute, 1, func(i int) outcome { return ok(n-1-i, time.Minute) }),
		[]step{{time.Minute, 1, no(0, time.Minute, time.Minute)}},
	)
	run(t, s, lim, steps)

	// Count the admissions of the same sequence: exactly 2N in [t0+59s, t0+60s].
	s = new(algorithm.FixedWindow)
	admitted := 0
	for _, st := range steps {
		if s.Take(t0+int64(st.at), lim, st.cost).Allowed {
			admitted += st.cost
		}
	}
	if admitted != 2*n {
		t.Errorf("admitted %d around the boundary, want exactly %d", admitted, 2*n)
	}
}

func TestFixedWindowCost(t *testing.T) {
	const ms = time.Millisecond
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Second}
	run(t, new(algorithm.FixedWindow), lim, []step{
		{100 * ms, 7, ok(3, 900*ms)},
		{100 * ms, 4, no(3, 900*ms, 900*ms)},
		{999 * ms, 3, ok(0, 1*ms)},
		{time.Second, 10, ok(0, time.Second)},
		{1500 * ms, 1, no(0, 500*ms, 500*ms)},
		{2 * time.Second, 6, ok(4, time.Second)},
		{2 * time.Second, 5, no(4, time.Second, time.Second)},
	})
}

// TestFixedWindowBound checks that a fixed window never admits more than Rate
// in one aligned window, nor more than 2·Rate in any window of length Period.
func TestFixedWindowBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := drawLimit(t, sluice.FixedWindow)
		p := int64(lim.Period)
		reqs := drawRequests(t, lim, drawStart(t, lim), 1, 120)
		admitted, _ := play(new(algorithm.FixedWindow), lim, reqs)
		perWindow := map[int64]int{}
		for _, a := range admitted {
			w := floorDiv(a.at, p)
			perWindow[w] += a.cost
			if perWindow[w] > lim.Rate {
				t.Fatalf("%v admitted %d in the window starting at t0%+d", lim, perWindow[w], w*p-t0)
			}
		}
		checkWindows(t, lim, admitted, 2*lim.Rate)
	})
}

// checkWindows fails if any half-open window [a, a+Period), a an admitted
// instant, holds more than most admitted units. Checking windows that start
// at admitted instants is enough: any window can slide right to its first
// admitted instant without losing one.
func checkWindows(t *rapid.T, lim sluice.Limit, admitted []req, most int) {
	p := int64(lim.Period)
	for i, a := range admitted {
		units := 0
		for _, b := range admitted[i:] {
			if b.at >= a.at+p {
				break
			}
			units += b.cost
		}
		if units > most {
			t.Fatalf("%v admitted %d units in [t0%+d, t0%+d+%v), more than %d", lim, units, a.at-t0, a.at-t0, lim.Period, most)
		}
	}
}
