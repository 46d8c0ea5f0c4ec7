package algorithm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// TestSlidingBucketsEstimate is the documented example: 100/min in 4
// sub-windows of 15 s holding 20, 30, 10, 25 and 5 units, 6 s into the
// current one: 20·9/15 + 30 + 10 + 25 + 5 = 82, so 18 more are admitted.
// The 19th fits once 20·(15s−e)/15s rounds to 11 or less: below 11.5, from
// e = 6.375 s + 1 ns.
func TestSlidingBucketsEstimate(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute, Buckets: 4}
	if err := lim.Validate(); err != nil {
		t.Fatal(err)
	}
	s := new(algorithm.SlidingBuckets)
	// The newest units, at 61 s, weigh until their sub-window's end (75 s)
	// plus a period: 135 s.
	run(t, s, lim, concat(
		[]step{
			{1 * time.Second, 20, ok(80, 74*time.Second)},
			{16 * time.Second, 30, ok(50, 74*time.Second)},
			{31 * time.Second, 10, ok(40, 74*time.Second)},
			{46 * time.Second, 25, ok(15, 74*time.Second)},
			// 20·14/15 = 18.67 rounds to 19: 19 + 30 + 10 + 25 = 84, and
			// 5 more: 11 remain.
			{61 * time.Second, 5, ok(11, 74*time.Second)},
		},
		repeat(18, 66*time.Second, 1, func(i int) outcome { return ok(17-i, 69*time.Second) }),
		[]step{
			{66 * time.Second, 1, no(0, 375*time.Millisecond+1, 69*time.Second)},
			{66*time.Second + 1, 1, no(0, 375*time.Millisecond, 69*time.Second-1)},
			{66*time.Second + 375*time.Millisecond + 1, 1, ok(0, 68625*time.Millisecond-1)},
		},
	))
}

// TestSlidingBucketsRetryAcrossSubWindows: a limit spent in one sub-window
// alone counts whole for a period; the next unit fits once that
// sub-window's weight rounds below 10 (10·(15s−e)/15s < 9.5), 0.75 s and
// a nanosecond after it begins to leave the period, four sub-windows later.
func TestSlidingBucketsRetryAcrossSubWindows(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 4}
	s := new(algorithm.SlidingBuckets)
	run(t, s, lim, []step{
		{0, 10, ok(0, 75*time.Second)},
		// At 1 s: wait until 10·(15s−e)/15s rounds to 9 or less in
		// sub-window 4, from e = 0.75 s + 1 ns: at 60.75 s + 1 ns.
		{time.Second, 1, no(0, 59750*time.Millisecond+1, 74*time.Second)},
		{60 * time.Second, 1, no(0, 750*time.Millisecond+1, 15*time.Second)},
		{60*time.Second + 1, 1, no(0, 750*time.Millisecond, 15*time.Second-1)},
		// The new unit weighs until 75 s + 60 s.
		{60*time.Second + 750*time.Millisecond + 1, 1, ok(0, 74250*time.Millisecond-1)},
	})
}

// TestSlidingBucketsOneIsSlidingWindow: with one bucket the bucketed counter
// is the two-window counter, decision for decision and field for field.
func TestSlidingBucketsOneIsSlidingWindow(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := drawLimit(t, sluice.SlidingWindow)
		reqs := drawRequests(t, lim, drawStart(t, lim), 1, 60)
		var a algorithm.SlidingWindow
		var b algorithm.SlidingBuckets
		for i, r := range reqs {
			if rapid.IntRange(0, 9).Draw(t, "refund") == 0 {
				a.Refund(r.at, lim, r.cost)
				b.Refund(r.at, lim, r.cost)
			}
			ra, rb := a.Take(r.at, lim, r.cost), b.Take(r.at, lim, r.cost)
			if ra != rb {
				t.Fatalf("request %d %v: bucketed %+v, two-window %+v", i, r, rb, ra)
			}
			if a.Expires() != b.Expires() {
				t.Fatalf("request %d %v: bucketed expires %d, two-window %d", i, r, b.Expires(), a.Expires())
			}
		}
	})
}

// TestSlidingBucketsRetryAfterIsExact: a request refused with RetryAfter r
// is refused at now+r−1 and admitted at now+r, if nothing else is spent.
func TestSlidingBucketsRetryAfterIsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := drawLimitCR(t, sluice.SlidingWindow, false)
		lim.Buckets = uint8(rapid.IntRange(2, sluice.MaxBuckets).Draw(t, "buckets"))
		lim.Period = lim.Period / time.Duration(lim.Buckets) / time.Microsecond * time.Microsecond * time.Duration(lim.Buckets)
		if lim.Period == 0 {
			lim.Period = time.Duration(lim.Buckets) * time.Microsecond
		}
		if err := lim.Validate(); err != nil {
			t.Fatal(err)
		}
		var s algorithm.SlidingBuckets
		for i, r := range drawRequests(t, lim, drawStart(t, lim), 1, 60) {
			res := s.Take(r.at, lim, r.cost)
			if res.Allowed {
				continue
			}
			retry := int64(res.RetryAfter)
			if retry < 1 {
				t.Fatalf("request %d %v: refused with RetryAfter %v", i, r, res.RetryAfter)
			}
			if c := s; c.Take(r.at+retry, lim, r.cost).Allowed != true {
				t.Fatalf("request %d %v: refused again after its RetryAfter %v", i, r, res.RetryAfter)
			}
			if c := s; retry > 1 && c.Take(r.at+retry-1, lim, r.cost).Allowed {
				t.Fatalf("request %d %v: admitted a nanosecond before its RetryAfter %v", i, r, res.RetryAfter)
			}
		}
	})
}

// TestSlidingBucketsNeverForgets: changing the number of buckets, or the
// clock stepping back, keeps every counted unit.
func TestSlidingBucketsNeverForgets(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 4}
	checkNeverForgets(t, new(algorithm.SlidingBuckets), lim, layoutChange{"buckets 4 → 8", func(l *sluice.Limit) { l.Buckets = 8 }})
}

// layoutChange is a change of a limit's layout that a state goes on under.
type layoutChange struct {
	name   string
	change func(*sluice.Limit)
}

// checkNeverForgets spends 7 of lim's 10 a minute on s at 50 s, then
// makes each change in turn, a second apart from 55 s on, and steps the
// clock back to 10 s: none of the 7 units is forgotten, so 4 more are
// refused after every change and after the step back, and 3 fit exactly.
func checkNeverForgets(t *testing.T, s state, lim sluice.Limit, changes ...layoutChange) {
	t.Helper()
	s.Take(t0+int64(50*time.Second), lim, 7)
	at := t0 + int64(55*time.Second)
	for _, c := range changes {
		c.change(&lim)
		if res := s.Take(at, lim, 4); res.Allowed {
			t.Fatalf("after %s: admitted 4 more over 7 of 10: %+v", c.name, res)
		}
		at += int64(time.Second)
	}
	back := time.Duration(at - int64(time.Second) - t0 - int64(10*time.Second))
	if res := s.Take(t0+int64(10*time.Second), lim, 4); res.Allowed {
		t.Fatalf("clock back %v: admitted 4 more over 7 of 10: %+v", back, res)
	}
	if res := s.Take(t0+int64(10*time.Second), lim, 3); !res.Allowed || res.Remaining != 0 {
		t.Fatalf("clock back %v: 3 more over 7 of 10 = %+v, want admitted, 0 remaining", back, res)
	}
}

// TestSlidingBucketsRingIndexAgreesWithDivision: the ring index a state
// keeps, stepped without division within and across sub-windows, leads to
// the decisions, counts and expiries of a state that recomputes it by
// division at every call, through refunds, long gaps, a clock gone back and
// a change of period or of k.
func TestSlidingBucketsRingIndexAgreesWithDivision(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(2, sluice.MaxBuckets).Draw(t, "k")
		lim := sluice.Limit{
			Algorithm:     sluice.SlidingWindow,
			Rate:          rapid.IntRange(1, 50).Draw(t, "rate"),
			Period:        time.Duration(rapid.Int64Range(int64(k), 1e10).Draw(t, "period")),
			Buckets:       uint8(k),
			CountRejected: rapid.Bool().Draw(t, "countRejected"),
		}
		var fast, slow algorithm.SlidingBuckets
		now := rapid.Int64Range(-1e12, 1e12).Draw(t, "start")
		for i := range rapid.IntRange(1, 200).Draw(t, "steps") {
			switch rapid.IntRange(0, 20).Draw(t, "event") {
			case 0: // a long gap
				now += rapid.Int64Range(0, 3*int64(lim.Period)).Draw(t, "gap")
			case 1: // the clock goes back
				now -= rapid.Int64Range(0, int64(lim.Period)).Draw(t, "back")
			case 2: // the limit changes
				if rapid.Bool().Draw(t, "newK") {
					lim.Buckets = uint8(rapid.IntRange(2, sluice.MaxBuckets).Draw(t, "newBuckets"))
				}
				lim.Period = time.Duration(rapid.Int64Range(int64(lim.Buckets), 1e10).Draw(t, "newPeriod"))
			default:
				now += rapid.Int64Range(0, int64(lim.Period)/int64(lim.Buckets)).Draw(t, "step")
			}
			cost := rapid.IntRange(0, 5).Draw(t, "cost")
			slow.ForgetRing()
			if rapid.IntRange(0, 5).Draw(t, "refund") == 0 {
				fast.Refund(now, lim, cost)
				slow.Refund(now, lim, cost)
			} else if f, s := fast.Take(now, lim, cost), slow.Take(now, lim, cost); f != s {
				t.Fatalf("step %d at %d: ring index %+v, division %+v", i, now, f, s)
			}
			if fast.Counts != slow.Counts || fast.Start != slow.Start || fast.Until != slow.Until || fast.K != slow.K {
				t.Fatalf("step %d at %d: ring index state %+v, division %+v", i, now, fast, slow)
			}
		}
	})
}
