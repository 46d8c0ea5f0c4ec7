package algorithm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// TestSlidingLogHeldBelowItsSizeKeepsItsRate: a log held to fewer entries
// than its limit needs (a store's memory budget) still admits its rate,
// less at most what one of its slots holds per period, and never more
// than its rate in any window. 1,000 a minute, 10,000 requests one every
// 60 ms (exactly the rate), the log held to 64 entries. When the log merged
// its two oldest entries past the cap, the oldest units moved onto the next
// entry's instant with every new entry and never left: it admitted 5,320.
func TestSlidingLogHeldBelowItsSizeKeepsItsRate(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 1000, Period: time.Minute}
	const n, most = 10_000, 64
	p, step := int64(lim.Period), int64(lim.Period)/int64(lim.Rate)
	slot := algorithm.LogSlot(lim, most)
	if need := (p + most - 2) / (most - 1); slot != need {
		t.Fatalf("LogSlot(%v, %d) = %v, want ⌈Period/(most−1)⌉ = %v", lim, most, time.Duration(slot), time.Duration(need))
	}
	s := new(algorithm.SlidingLog)
	var admitted []int64
	for i := range n {
		now := t0 + int64(i)*step
		if s.TakeAtMost(now, lim, 1, most).Allowed {
			admitted = append(admitted, now)
		}
		if s.Entries() > most {
			t.Fatalf("request %d: the log holds %d entries, more than %d", i, s.Entries(), most)
		}
	}
	// At exactly the rate a slot holds ⌈slot/step⌉ requests; each period
	// may lose one slot's worth.
	perSlot := int((slot + step - 1) / step)
	periods := int((int64(n)*step + p - 1) / p)
	if want := n - periods*perSlot; len(admitted) < want {
		t.Errorf("admitted %d of %d requests at exactly the rate, want at least %d (%d periods, less one slot of %v, %d requests, each)",
			len(admitted), n, want, periods, time.Duration(slot), perSlot)
	}
	for i := lim.Rate; i < len(admitted); i++ {
		if admitted[i]-admitted[i-lim.Rate] < p {
			t.Fatalf("admitted %d units in [t0%+d, t0%+d+%v)", lim.Rate+1, admitted[i-lim.Rate]-t0, admitted[i-lim.Rate]-t0, lim.Period)
		}
	}
	t.Logf("admitted %d of %d; slot %v (%d requests)", len(admitted), n, time.Duration(slot), perSlot)
}

// TestSlidingLogHeldBelowItsSizeIsBounded checks, for logs held to a drawn
// number of entries that may change from request to request (a store's
// budget as other keys come and go), that the log never admits more than
// Rate units in any half-open window [a, a+Period) and never holds more
// entries than the most it was allowed, or than it held before.
func TestSlidingLogHeldBelowItsSizeIsBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := sluice.Limit{
			Algorithm: sluice.SlidingLog,
			Rate:      rapid.OneOf(rapid.IntRange(1, 200), rapid.IntRange(1, sluice.MaxLogRate)).Draw(t, "rate"),
			Period:    time.Duration(periods.Draw(t, "period")),
		}
		if rapid.Bool().Draw(t, "precision") {
			lim.Precision = time.Duration(rapid.Int64Range(1, int64(lim.Period)).Draw(t, "precision"))
		}
		reqs := drawRequests(t, lim, drawStart(t, lim), 1, 200)
		mosts := rapid.SliceOfN(rapid.Int64Range(1, 80), 1, 4).Draw(t, "mosts")
		s := new(algorithm.SlidingLog)
		var admitted []req
		for i, r := range reqs {
			most := mosts[i*len(mosts)/len(reqs)]
			before := s.Entries()
			if s.TakeAtMost(r.at, lim, r.cost, most).Allowed {
				admitted = append(admitted, r)
			}
			if got := s.Entries(); got > max(int(most), before) {
				t.Fatalf("%v step %d: the log holds %d entries, more than the %d allowed and the %d it held", lim, i, got, most, before)
			}
		}
		checkWindows(t, lim, admitted, lim.Rate)
	})
}
