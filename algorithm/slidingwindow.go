package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

// SlidingWindow is the sliding window counter: it keeps the counts of the
// current epoch-aligned window and of the one before, and estimates the units
// spent in the last Period as
//
//	estimate = ⌊Prev · (Period − elapsed) / Period⌋ + Curr
//
// where elapsed is the time since the current window began. A request of cost
// c is admitted when estimate + c ≤ Rate. The estimate assumes the previous
// window's units were spread evenly; it can admit a little more or less than
// an exact log (see the simulator's accuracy study).
//
// A clock that steps back less than a period forgets nothing: a reading
// before the current window's start is decided at the start (elapsed 0,
// Prev counted whole), so on the latest clock reading seen the bound holds
// as it does for a clock that only goes forward.
//
// Example: a limit of 50/min with 42 units in the previous minute and 18 in
// this one, 15 s in: ⌊42·45/60⌋ + 18 = 49, so one more is admitted.
type SlidingWindow struct {
	// Start is the start of the current window in Unix nanoseconds.
	Start int64
	// Prev and Curr are the units counted in the previous and current windows.
	Prev, Curr int64
	// Until is the instant from which no counted unit weighs on the estimate
	// any more; zero for a fresh key.
	Until int64
}

// setUntil records when the state becomes fresh again.
func (s *SlidingWindow) setUntil(p int64) {
	switch {
	case s.Curr > 0:
		s.Until = s.Start + 2*p
	case s.Prev > 0:
		s.Until = s.Start + p
	default:
		s.Until = 0
	}
}

// maxCount bounds a counter that CountRejected makes grow without limit.
const maxCount = 1 << 60

// roll moves the state to the window that holds now.
func (s *SlidingWindow) roll(now, p int64) {
	w := windowStart(now, p)
	switch {
	case w == s.Start:
	case w == s.Start+p:
		s.Prev, s.Curr, s.Start = s.Curr, 0, w
	case w > s.Start:
		s.Prev, s.Curr, s.Start = 0, 0, w
	case w == s.Start-p && s.Until != 0:
		// The clock stepped back into the previous window: stay, and the
		// reading counts as the window's start (elapsed clamps at 0, Prev
		// weighs fully). Moving back would make Prev stand for the window
		// before it, weighing nearly nothing, and the next roll forward
		// would forget it.
	default:
		// The clock went back more than a period, or the period changed:
		// keep the counts, move the window, rather than hold the key in a
		// window the clock may take hours to reach again. (With nothing
		// counted, Until 0, the state is a fresh key's, as the Redis
		// script, which deletes it, sees it.)
		s.Start = w
	}
}

// Take decides a request of cost units at now and spends them if admitted.
// With lim.CountRejected a rejected request is counted too.
func (s *SlidingWindow) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	p := int64(lim.Period)
	s.roll(now, p)
	elapsed := max(now-s.Start, 0) // a reading before Start: see roll
	weighted := mulDiv(s.Prev, p-elapsed, p)
	rate, c := int64(lim.Rate), int64(cost)
	var res sluice.Result
	if weighted+s.Curr+c > rate {
		if lim.CountRejected {
			// Counted first, so that RetryAfter includes it; the count
			// stops at 2^60, where no sum can overflow and only a client
			// that sent 10^18 requests could tell.
			s.Curr = min(s.Curr+c, maxCount)
		}
		res.RetryAfter = time.Duration(s.retryAfter(now, p, rate, c))
	} else {
		s.Curr += c
		res.Allowed = true
	}
	s.setUntil(p)
	res.Remaining = int(max(rate-weighted-s.Curr, 0))
	res.ResetAfter = time.Duration(max(s.Until-now, 0))
	return res
}

// retryAfter returns the time from now until a request of cost c fits,
// assuming nothing else is spent. The weight of the previous window falls as
// time passes; if even zero weight is not enough, the request must wait for
// the next window, where today's count becomes the previous one.
func (s *SlidingWindow) retryAfter(now, p, rate, c int64) int64 {
	if k := rate - c - s.Curr; k >= 0 && s.Prev > 0 {
		// ⌊Prev·(p−e)/p⌋ ≤ k  ⇔  p−e < (k+1)·p/Prev  ⇔  e ≥ p − ⌈(k+1)·p/Prev⌉ + 1
		e := p - mulDivCeil(k+1, p, s.Prev) + 1
		if e < p {
			return max(s.Start+e-now, 1)
		}
	}
	wait := s.Start + p - now // until the next window
	if s.Curr > 0 {
		if e := p - mulDivCeil(rate-c+1, p, s.Curr) + 1; e > 0 {
			wait += e
		}
	}
	return wait
}

// Peek reports the estimate at now without spending: ResetAfter is the time
// until no counted unit weighs on it, 0 for a fresh key.
func (s *SlidingWindow) Peek(now int64, lim sluice.Limit) sluice.Result {
	c := *s // a value with no heap: Take of cost 0 on a copy changes nothing here
	return c.Take(now, lim, 0)
}

// Estimate returns the units the counter counts at now under a period of
// lim.Period, ⌊Prev·(Period − elapsed)/Period⌋ + Curr (what Take compares
// with the rate), without changing the state: 0 for a fresh key. A store
// that moves a key to another layout seeds the new state with it, so that
// nothing the counter counted is forgotten.
func (s *SlidingWindow) Estimate(now int64, lim sluice.Limit) int64 {
	c, p := *s, int64(lim.Period)
	c.roll(now, p)
	return mulDiv(c.Prev, p-max(now-c.Start, 0), p) + c.Curr
}

// Seed counts units more in the window that holds now under lim, as
// arrived now: whole until the window ends, then weighing less and less
// over the next. A store that moves a key from another layout seeds it
// with the units that layout counted, so that nothing is forgotten.
func (s *SlidingWindow) Seed(now int64, lim sluice.Limit, units int64) {
	p := int64(lim.Period)
	s.roll(now, p)
	s.Curr = min(s.Curr+max(units, 0), maxCount)
	s.setUntil(p)
}

// Refund gives cost units back to the current window.
func (s *SlidingWindow) Refund(now int64, lim sluice.Limit, cost int) {
	p := int64(lim.Period)
	s.roll(now, p)
	s.Curr = max(s.Curr-int64(cost), 0)
	s.setUntil(p)
}

// Expires returns the instant from which no counted unit weighs on the
// estimate any more.
func (s *SlidingWindow) Expires() int64 { return s.Until }

// Prepare returns 0: a sliding window derives nothing from its limit.
func (*SlidingWindow) Prepare(sluice.Limit) int64 { return 0 }

// TakePrepared is Take; the sliding window has nothing to prepare.
func (s *SlidingWindow) TakePrepared(now int64, lim sluice.Limit, _ int64, cost int) sluice.Result {
	return s.Take(now, lim, cost)
}

// Bytes returns 0: a sliding window holds no heap.
func (*SlidingWindow) Bytes() int { return 0 }
