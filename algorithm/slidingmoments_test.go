package algorithm_test

import (
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// drawMomentsLimit draws a sliding window with 1 to 16 sub-windows and
// moments from minD to sluice.MaxMoments, its period rounded to a whole
// number of microseconds times the sub-windows.
func drawMomentsLimit(t *rapid.T, minD int) sluice.Limit {
	lim := drawLimit(t, sluice.SlidingWindow)
	k := rapid.IntRange(1, sluice.MaxBuckets).Draw(t, "buckets")
	lim.Buckets = uint8(k)
	lim.Moments = uint8(rapid.IntRange(minD, sluice.MaxMoments).Draw(t, "moments"))
	unit := time.Duration(k) * time.Microsecond
	lim.Period = max(lim.Period/unit*unit, unit)
	if lim.Moments == 0 {
		return lim // not a valid Limit: the algorithm's own d = 0
	}
	if err := lim.Validate(); err != nil {
		t.Fatalf("drew an invalid limit: %v", err)
	}
	return lim
}

// TestSlidingMomentsWithoutMomentsIsSlidingBuckets: with no means the
// moments counter decides as today's k-bucket counter, Result for Result
// and expiry for expiry, refunds and counted rejections included.
func TestSlidingMomentsWithoutMomentsIsSlidingBuckets(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := drawMomentsLimit(t, 0)
		lim.Moments = 0
		var a algorithm.SlidingBuckets
		var b algorithm.SlidingMoments
		for i, r := range drawRequests(t, lim, drawStart(t, lim), 1, 100) {
			if rapid.IntRange(0, 9).Draw(t, "refund") == 0 {
				a.Refund(r.at, lim, r.cost)
				b.Refund(r.at, lim, r.cost)
			}
			ra, rb := a.Take(r.at, lim, r.cost), b.Take(r.at, lim, r.cost)
			if ra != rb {
				t.Fatalf("%v request %d %v: moments 0 %+v, buckets %+v", lim, i, r, rb, ra)
			}
			if a.Expires() != b.Expires() {
				t.Fatalf("%v request %d %v: moments 0 expires %d, buckets %d", lim, i, r, b.Expires(), a.Expires())
			}
		}
	})
}

// TestSlidingMomentsAlignedPeriodWithinRate: whatever the means say, the k
// sub-windows counted whole never hold more than the rate, so the units
// admitted in any k consecutive aligned sub-windows (a period aligned to
// the sub-windows) are at most Rate, and in any period at most 2·Rate.
func TestSlidingMomentsAlignedPeriodWithinRate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := drawMomentsLimit(t, 1)
		reqs := drawRequests(t, lim, drawStart(t, lim), 1, 150)
		admitted, _ := play(new(algorithm.SlidingMoments), lim, reqs)
		g := int64(lim.Period) / int64(lim.Buckets)
		for _, a := range admitted {
			// Every aligned period that holds a: those starting at the k
			// sub-windows up to a's.
			n := floorDiv(a.at, g)
			for from := (n - int64(lim.Buckets) + 1) * g; from <= n*g; from += g {
				units := 0
				for _, b := range admitted {
					if b.at >= from && b.at < from+int64(lim.Period) {
						units += b.cost
					}
				}
				if units > lim.Rate {
					t.Fatalf("%v admitted %d units in the aligned [t0%+d, +%v), more than %d", lim, units, from-t0, lim.Period, lim.Rate)
				}
			}
		}
		checkWindows(t, lim, admitted, 2*lim.Rate)
	})
}

// TestSlidingMomentsRetryAfterNeverEarly: a request refused with
// RetryAfter r is admitted at now+r if nothing else is spent, at every k
// and d; and r is at most the time until the oldest sub-window counted has
// left the period.
func TestSlidingMomentsRetryAfterNeverEarly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := drawMomentsLimit(t, 1)
		var s algorithm.SlidingMoments
		for i, r := range drawRequests(t, lim, drawStart(t, lim), 1, 100) {
			res := s.Take(r.at, lim, r.cost)
			if res.Allowed {
				continue
			}
			if res.RetryAfter < 1 || res.RetryAfter > res.ResetAfter+time.Duration(lim.Period) {
				t.Fatalf("%v request %d %v: refused with RetryAfter %v, ResetAfter %v", lim, i, r, res.RetryAfter, res.ResetAfter)
			}
			if c := s.Clone(); !c.Take(r.at+int64(res.RetryAfter), lim, r.cost).Allowed {
				t.Fatalf("%v request %d %v: refused again after its RetryAfter %v", lim, i, r, res.RetryAfter)
			}
		}
	})
}

// TestSlidingMomentsRetryAfterIsTheFirst: a request refused with
// RetryAfter r is refused at every instant before now+r at which the
// decision could differ (the first instant of each offset level of each
// sub-window, every nanosecond when a sub-window is shorter than its
// levels), if nothing else is spent: r is the first time it fits, even
// where the estimate dips below the limit and rises again.
func TestSlidingMomentsRetryAfterIsTheFirst(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := drawMomentsLimit(t, 1)
		var s, after algorithm.SlidingMoments // after the last refusal
		var last req
		var retry int64
		for _, r := range drawRequests(t, lim, drawStart(t, lim), 1, 60) {
			if res := s.Take(r.at, lim, r.cost); !res.Allowed {
				last, retry, after = r, r.at+int64(res.RetryAfter), s.Clone()
				if c := s.Clone(); !c.Take(retry, lim, r.cost).Allowed {
					t.Fatalf("%v request %v: refused again after its RetryAfter %v", lim, r, res.RetryAfter)
				}
			}
		}
		if retry == 0 {
			return
		}
		g := int64(lim.Period) / int64(lim.Buckets)
		const levels = 1 << 13
		for base := floorDiv(last.at, g) * g; base < retry; base += g {
			for x := int64(0); x < min(g, levels); x++ {
				at := base + x
				if g >= levels {
					at = base + (x*g+levels-1)/levels // the first instant of level x
				}
				if at < last.at || at >= retry {
					continue
				}
				// Admitted exactly when a peek leaves room for its cost.
				if after.Peek(at, lim).Remaining >= last.cost {
					t.Fatalf("%v request %v: RetryAfter %v, but admitted at t0%+d, %v earlier",
						lim, last, time.Duration(retry-last.at), at-t0, time.Duration(retry-at))
				}
			}
		}
	})
}

// TestSlidingMomentsWeighsByWhereUnitsFell: at one moment (d = 1), a
// previous window whose 100 units all came in its first second weighs
// nothing halfway through the next window, and one whose units all came
// in its last second weighs them all; the two-window counter weighs 50 in
// both cases.
func TestSlidingMomentsWeighsByWhereUnitsFell(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute, Moments: 1}
	if err := lim.Validate(); err != nil {
		t.Fatal(err)
	}
	early := new(algorithm.SlidingMoments)
	late := new(algorithm.SlidingMoments)
	for i := range int64(100) {
		early.Take(t0+i*int64(10*time.Millisecond), lim, 1)
		late.Take(t0+int64(59*time.Second)+i*int64(10*time.Millisecond), lim, 1)
	}
	half := t0 + int64(90*time.Second)
	if res := early.Peek(half, lim); res.Remaining != 100 {
		t.Errorf("units early in the previous window: Remaining %d halfway through the next, want 100", res.Remaining)
	}
	if res := late.Peek(half, lim); res.Remaining != 0 {
		t.Errorf("units late in the previous window: Peek halfway through the next = %+v, want none remaining", res)
	}
	// One mean fits a line to the late units' density, which gives some of
	// them back before the window's last second: the retry comes between
	// 90 s and 120 s, when the window has left.
	res := late.Take(half, lim, 1)
	if at := half + int64(res.RetryAfter); res.Allowed || at <= half || at > t0+int64(120*time.Second) {
		t.Errorf("units late in the previous window: Take at 90 s = %+v, want refused, retry by 120 s", res)
	}
}

// TestSlidingMomentsNeverForgets: changing the number of sub-windows or
// of means, or the clock stepping back, keeps every counted unit.
func TestSlidingMomentsNeverForgets(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 4, Moments: 2}
	var s algorithm.SlidingMoments
	checkNeverForgets(t, &s, lim,
		layoutChange{"buckets 4 → 8", func(l *sluice.Limit) { l.Buckets = 8 }},
		layoutChange{"moments 2 → 5", func(l *sluice.Limit) { l.Moments = 5 }})
	if got := s.Units(); got != 10 {
		t.Fatalf("Units = %d, want 10", got)
	}
}

// TestSlidingMomentsBytes: the heap a state holds is its buffer,
// (k+1)·(2+d) + 4·d bytes rounded up to the allocator's size class.
func TestSlidingMomentsBytes(t *testing.T) {
	for _, c := range []struct{ k, d uint8 }{{1, 1}, {8, 4}, {5, 8}, {8, 6}, {16, 2}, {16, 8}} {
		lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute, Buckets: c.k, Moments: c.d}
		var s algorithm.SlidingMoments
		s.Take(t0, lim, 1)
		need := (int(c.k)+1)*(2+int(c.d)) + 4*int(c.d)
		if got := s.Bytes(); got < need || got > need+need/4+16 {
			t.Errorf("k=%d d=%d: Bytes %d, want %d rounded to a size class", c.k, c.d, got, need)
		}
	}
}

// momentsCases are the (k, d) the moments counter is measured at: every k
// of BenchmarkTakeBuckets with the default's two means, and the other
// layouts docs/algorithms.md tabulates.
var momentsCases = []struct{ k, d uint8 }{{1, 2}, {2, 2}, {4, 2}, {8, 2}, {16, 2}, {8, 4}, {5, 8}, {8, 6}}

// warmMoments returns a moments counter with k sub-windows and d means
// brought to its steady state under hotLimit.
func warmMoments(k, d uint8) (sluice.Limit, *algorithm.SlidingMoments, int64) {
	lim := hotLimit(sluice.SlidingWindow)
	lim.Buckets, lim.Moments = k, d
	s := new(algorithm.SlidingMoments)
	return lim, s, warmSteady(s, lim)
}

// BenchmarkTakeMoments is BenchmarkTakeBuckets for the moments counter: a
// request every 5 ms at 100/s, about half denied (each with its search for
// a retry time).
func BenchmarkTakeMoments(b *testing.B) {
	for _, c := range momentsCases {
		b.Run("k="+strconv.Itoa(int(c.k))+"/d="+strconv.Itoa(int(c.d)), func(b *testing.B) {
			lim, s, now := warmMoments(c.k, c.d)
			b.ReportAllocs()
			for b.Loop() {
				now += hotStep
				s.Take(now, lim, 1)
			}
		})
	}
}

// TestTakeMomentsAllocs: a decision on a warm moments counter allocates
// nothing, denials, refunds and peeks included.
func TestTakeMomentsAllocs(t *testing.T) {
	for _, c := range momentsCases {
		lim, s, now := warmMoments(c.k, c.d)
		if allocs := takeAllocs(lim, s, now); allocs != 0 {
			t.Errorf("k=%d d=%d: Take allocates %v times per call, want 0", c.k, c.d, allocs)
		}
		if allocs := testing.AllocsPerRun(100, func() { s.Peek(now, lim) }); allocs != 0 {
			t.Errorf("k=%d d=%d: Peek allocates %v times per call, want 0", c.k, c.d, allocs)
		}
	}
}

// TestSlidingMomentsPeekFresh: a fresh state peeks as fresh, without
// changing or allocating.
func TestSlidingMomentsPeekFresh(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 4, Moments: 3}
	var s algorithm.SlidingMoments
	if res := s.Peek(t0, lim); !res.Allowed || res.Remaining != 10 || res.ResetAfter != 0 {
		t.Errorf("Peek of a fresh state = %+v, want allowed, 10 remaining, no reset", res)
	}
	if allocs := testing.AllocsPerRun(100, func() { s.Peek(t0, lim) }); allocs != 0 || s.Bytes() != 0 {
		t.Errorf("Peek of a fresh state allocates %v times and leaves %d bytes, want none", allocs, s.Bytes())
	}
}

// TestSlidingMomentsRefundUnpinsAnEmptySubWindow: units merged after the
// clock stepped back are pinned; refunded to none, the sub-window is as
// fresh, and a unit counted in it afterwards fades as any other.
func TestSlidingMomentsRefundUnpinsAnEmptySubWindow(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 1, Period: time.Second, Moments: 1}
	var s, fresh algorithm.SlidingMoments
	s.Take(t0, lim, 1)
	s.Refund(t0-int64(time.Second), lim, 1) // the clock back: merged, pinned, then refunded
	for i, at := range []int64{t0 - int64(time.Second), t0 - int64(time.Second), t0 + int64(100*time.Millisecond)} {
		if a, b := s.Take(at, lim, 1), fresh.Take(at, lim, 1); a != b {
			t.Fatalf("step %d at t0%+d: %+v on the refunded state, %+v on a fresh one", i, at-t0, a, b)
		}
	}
}

// TestSlidingMomentsKeepsUnitsThroughChanges: through changes of k, d and
// period, clock steps back, refunds and peeks, a state never panics, keeps
// every unit it counted across a change made at one instant, reports
// results within their bounds, and holds a buffer of its layout's size.
func TestSlidingMomentsKeepsUnitsThroughChanges(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := drawMomentsLimit(t, 1)
		var s algorithm.SlidingMoments
		now := drawStart(t, lim)
		for i := range rapid.IntRange(1, 150).Draw(t, "steps") {
			switch rapid.IntRange(0, 12).Draw(t, "event") {
			case 0:
				before := s.Units()
				next := drawMomentsLimit(t, 1)
				res := s.Take(now, next, 0)
				if got := s.Units(); got != min(before, 1<<16-1) {
					t.Fatalf("step %d: %v → %v at one instant: %d units, had %d", i, lim, next, got, before)
				}
				if res.Allowed && before > 0 && res.Remaining > max(next.Rate-int(before), 0) {
					t.Fatalf("step %d: %v → %v: Remaining %d with %d units kept", i, lim, next, res.Remaining, before)
				}
				lim = next
			case 1:
				now -= rapid.Int64Range(0, int64(lim.Period)).Draw(t, "back")
			case 2:
				s.Refund(now, lim, rapid.IntRange(1, lim.Rate).Draw(t, "refund"))
			case 3:
				c := s.Clone()
				s.Peek(now, lim)
				if s.Units() != c.Units() || s.Expires() != c.Expires() {
					t.Fatalf("step %d: Peek changed the state", i)
				}
			default:
				now += rapid.Int64Range(0, int64(lim.Period)/int64(lim.Buckets)).Draw(t, "step")
				res := s.Take(now, lim, rapid.IntRange(1, lim.Rate).Draw(t, "cost"))
				if res.Remaining < 0 || res.Remaining > lim.Rate || res.ResetAfter < 0 || (!res.Allowed && res.RetryAfter <= 0) {
					t.Fatalf("step %d: %v: %+v", i, lim, res)
				}
			}
			k, d := int(lim.Buckets), int(lim.Moments)
			if need := (k+1)*(2+d) + 4*d; s.Units() > 0 && s.Bytes() < need {
				t.Fatalf("step %d: %v: %d bytes of buffer, its layout needs %d", i, lim, s.Bytes(), need)
			}
		}
	})
}

// TestSlidingMomentsClockBackThenForwardForgetsNothing: a reading before
// the state's sub-window, by less or more than a period, and the clock
// back at the true time: the units counted before the step still weigh,
// as long as they would have had the clock never stepped.
func TestSlidingMomentsClockBackThenForwardForgetsNothing(t *testing.T) {
	const s = int64(time.Second)
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: 10 * time.Second, Buckets: 2, Moments: 2}
	for _, back := range []int64{3 * s, 8 * s, 60 * s, 3600 * s} {
		var st algorithm.SlidingMoments
		at := t0 + 6*s // 1 s into a sub-window of 5 s
		if res := st.Take(at, lim, 10); !res.Allowed {
			t.Fatalf("back %ds: the first 10 refused: %+v", back/s, res)
		}
		if res := st.Take(at-back, lim, 1); res.Allowed {
			t.Fatalf("back %ds: admitted 1 over 10 of 10: %+v", back/s, res)
		}
		if res := st.Take(at+s/2, lim, 10); res.Allowed {
			t.Fatalf("back %ds, then forward: admitted 10 more 0.5 s after 10 of 10: %+v", back/s, res)
		}
		// 9 s later the 10 are still inside the last 10 s.
		if res := st.Take(at+9*s, lim, 1); res.Allowed {
			t.Fatalf("back %ds, then 9 s after 10 of 10: admitted 1: %+v", back/s, res)
		}
		if got := st.Expires(); got < at+10*s {
			t.Fatalf("back %ds: Expires %d ns before the units' period is over", back/s, at+10*s-got)
		}
	}
}

// TestSlidingMomentsNewPeriodSharingATagRealigns: a sub-window length whose
// 16-bit tag is another's (k = 10: 17 min and 60 days) still moves the
// state onto sub-windows aligned to the new length, as Redis's script,
// which keeps the length itself, does.
func TestSlidingMomentsNewPeriodSharingATagRealigns(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: 17 * time.Minute, Buckets: 10, Moments: 1}
	var st algorithm.SlidingMoments
	now := t0 + int64(time.Minute)
	st.Take(now, lim, 3)
	lim.Period = 60 * 24 * time.Hour
	g := int64(lim.Period) / 10
	st.Take(now+int64(time.Second), lim, 1)
	if want := (now+int64(time.Second))/g*g + 11*g; st.Expires() != want {
		t.Fatalf("after 17 min → 60 days: Expires %d, want %d (the sub-windows of the new length, pinned)", st.Expires(), want)
	}
}

// TestSlidingMomentsRefundKeepsWhereUnitsFell: a refund does not take its
// units from the current offset: the units left keep the sub-window's
// means, rather than looking as early as the earliest of them.
func TestSlidingMomentsRefundKeepsWhereUnitsFell(t *testing.T) {
	const s = int64(time.Second)
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: 10 * time.Second, Moments: 2}
	var st algorithm.SlidingMoments
	start := t0 - t0%(10*s)
	st.Take(start+s/10, lim, 5)
	st.Take(start+99*s/10, lim, 5)
	st.Refund(start+99*s/10, lim, 5) // which 5 is not known
	// 5 units remain, on average in the middle of the sub-window; half a
	// second after it, about 5·0.95 of them are still inside the period.
	if res := st.Take(start+105*s/10, lim, 10); res.Allowed || res.Remaining > 6 {
		t.Fatalf("0.6 s after 5 left of 10, 10 more: %+v, want refused with at most 6 remaining", res)
	}
}
