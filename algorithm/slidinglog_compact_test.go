package algorithm_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// year is the period of the amplification limit: a client-chosen override of
// 1,048,576 per year, the largest rate a sliding log accepts.
const year = 365 * 24 * time.Hour

// maxLogBytes bounds what one key's log holds on the heap after at most 200
// requests: one entry of 16 bytes per request, in a ring at most twice the
// entries (256 of them).
const maxLogBytes = 4 << 10

// TestSlidingLogCostIsOneEntry: a request of cost N is one entry of the log,
// not N, so a client that chooses a large cost and a large rate cannot make a
// key hold megabytes: the log holds one entry per request in the window,
// and its ring at most twice that.
func TestSlidingLogCostIsOneEntry(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: sluice.MaxLogRate, Period: year}
	s := new(algorithm.SlidingLog)
	if r := s.Take(t0, lim, lim.Rate); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("Take(t0, %d) = %+v, want allowed with Remaining 0", lim.Rate, r)
	}
	if got := logBytes(s); s.Entries() != 1 || got > 4*16 {
		t.Fatalf("a request of cost %d left %d entries in %d bytes, want 1 entry in at most %d", lim.Rate, s.Entries(), got, 4*16)
	}
	if r := s.Take(t0+int64(time.Hour), lim, 1); r.Allowed || r.RetryAfter != year-time.Hour {
		t.Fatalf("Take(t0+1h, 1) = %+v, want denied with RetryAfter %v", r, year-time.Hour)
	}
	// Many requests over the next period: one entry each, all kept (the
	// log is exact), in a ring at most twice as large.
	const n = 10_000
	for i := range n {
		if !s.Take(t0+int64(year)+int64(i)*(int64(year)/n), lim, 1+i%100).Allowed {
			t.Fatalf("request %d denied within the rate", i)
		}
	}
	if got := logBytes(s); s.Entries() != n || got > 2*16*n {
		t.Fatalf("%d requests over a year left %d entries in %d bytes, want %d entries in at most %d", n, s.Entries(), got, n, 2*16*n)
	}
}

// TestSlidingLogCompactBound checks, for rates far above the log's entry
// budget and costs up to the rate, that the log never admits more than Rate
// units in any half-open window [a, a+Period), counting the admitted
// requests that were not refunded (a refund gives back any admitted request
// still in the window, not only the latest), keeps Remaining and RetryAfter
// honest, and never holds more than maxLogBytes.
func TestSlidingLogCompactBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim := sluice.Limit{
			Algorithm: sluice.SlidingLog,
			Rate:      rapid.OneOf(rapid.IntRange(1, 200), rapid.IntRange(1, sluice.MaxLogRate)).Draw(t, "rate"),
			Period:    time.Duration(periods.Draw(t, "period")),
		}
		reqs := drawRequests(t, lim, drawStart(t, lim), 1, 200)
		s := new(algorithm.SlidingLog)
		var admitted []req
		for i, r := range reqs {
			before := s.Clone()
			res := s.Take(r.at, lim, r.cost)
			if res.Allowed {
				admitted = append(admitted, r)
			} else {
				retry := r.at + int64(res.RetryAfter)
				if c := before.Clone(); !c.Take(retry, lim, r.cost).Allowed {
					t.Fatalf("%v step %d: AllowN%v denied with RetryAfter %v, but denied again after it", lim, i, r, res.RetryAfter)
				}
				if c := before.Clone(); c.Take(retry-1, lim, r.cost).Allowed {
					t.Fatalf("%v step %d: AllowN%v denied with RetryAfter %v, but admitted 1ns earlier", lim, i, r, res.RetryAfter)
				}
			}
			if res.Remaining > 0 {
				if c := s.Clone(); !c.Take(r.at, lim, res.Remaining).Allowed {
					t.Fatalf("%v step %d: AllowN%v = Remaining %d, but a request of that cost is denied", lim, i, r, res.Remaining)
				}
			}
			if c := s.Clone(); res.Remaining+1 <= lim.Rate && c.Take(r.at, lim, res.Remaining+1).Allowed {
				t.Fatalf("%v step %d: AllowN%v = Remaining %d, but a request of cost %d is admitted", lim, i, r, res.Remaining, res.Remaining+1)
			}
			if got := logBytes(s); got > maxLogBytes {
				t.Fatalf("%v step %d: the log holds %d bytes, more than %d", lim, i, got, maxLogBytes)
			}
			// Refund one admitted request still in the window, the one
			// just admitted or any earlier one.
			live := 0
			for live < len(admitted) && admitted[live].at <= r.at-int64(lim.Period) {
				live++
			}
			if live < len(admitted) && rapid.IntRange(0, 9).Draw(t, "refund") == 0 {
				j := rapid.IntRange(live, len(admitted)-1).Draw(t, "refunded")
				s.Refund(r.at, lim, admitted[j].cost)
				admitted = append(admitted[:j], admitted[j+1:]...)
			}
		}
		checkWindows(t, lim, admitted, lim.Rate)
	})
}
