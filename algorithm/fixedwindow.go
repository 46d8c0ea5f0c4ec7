package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

// FixedWindow counts the units spent in the current window of length Period,
// aligned to the Unix epoch (so a 24h window is a UTC day), and admits at most
// Rate per window. Around a boundary it can admit 2·Rate within one Period:
// Rate at the end of one window and Rate at the start of the next. A reading
// up to one Period before the current window's start (the clock stepped
// back) counts in the current window, so the bounds hold on the latest
// reading seen.
type FixedWindow struct {
	// End is the end of the window Count belongs to, in Unix nanoseconds.
	End int64
	// Count is the number of units spent in the window ending at End.
	Count int64
}

// Take decides a request of cost units at now and spends them if admitted.
// With a Calendar, the window is the calendar period that holds now
// (calendarwindow.go).
func (s *FixedWindow) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	if lim.Calendar.Unit != sluice.NoCalendar {
		return s.takeCalendar(now, lim, cost)
	}
	p := int64(lim.Period)
	switch {
	case now >= s.End: // a new window
		s.End = windowStart(now, p) + p
		s.Count = 0
	case s.End-now > p && (s.Count == 0 || s.End-now > 2*p):
		// The clock went back more than a period, or the period shrank:
		// move to the window that holds now but keep the count,
		// conservatively, as SlidingWindow does. A smaller step back stays
		// in the current window if it counts anything: moving to the
		// previous one would lose its count to this one's, and this one
		// would start afresh when the clock came back.
		s.End = windowStart(now, p) + p
	}
	return s.spend(now, int64(lim.Rate), cost)
}

// spend decides cost units of a limit of rate in the window ending at End,
// which holds now. It takes the rate, not the Limit, which a call copies.
func (s *FixedWindow) spend(now, rate int64, cost int) sluice.Result {
	res := sluice.Result{ResetAfter: time.Duration(s.End - now)}
	if int64(cost) > rate-s.Count {
		res.Remaining = int(max(rate-s.Count, 0))
		res.RetryAfter = res.ResetAfter
		return res
	}
	s.Count += int64(cost)
	res.Allowed = true
	res.Remaining = int(max(rate-s.Count, 0))
	return res
}

// Peek reports the window that holds now without spending: a window that
// has ended reads as a new, empty one, and ResetAfter is always the end of
// the window that holds now.
func (s *FixedWindow) Peek(now int64, lim sluice.Limit) sluice.Result {
	c := *s // a value with no heap: Take of cost 0 on a copy changes nothing here
	return c.Take(now, lim, 0)
}

// Refund gives cost units back to the window that holds now, if it is still
// the window they were spent in: now is before its end, and no more than a
// period before its start (a clock stepped back, as Take counts it).
func (s *FixedWindow) Refund(now int64, lim sluice.Limit, cost int) {
	if now >= s.End {
		return
	}
	if lim.Calendar.Unit != sluice.NoCalendar {
		if !within(lim.Calendar, now, s.End, true) {
			return
		}
	} else if s.End-now > 2*int64(lim.Period) {
		return
	}
	s.Count = max(s.Count-int64(cost), 0)
}

// Expires returns the end of the window; an empty window is fresh now.
func (s *FixedWindow) Expires() int64 {
	if s.Count == 0 {
		return 0
	}
	return s.End
}

// Prepare returns 0: a fixed window derives nothing from its limit.
func (*FixedWindow) Prepare(sluice.Limit) int64 { return 0 }

// TakePrepared is Take; the fixed window has nothing to prepare.
func (s *FixedWindow) TakePrepared(now int64, lim sluice.Limit, _ int64, cost int) sluice.Result {
	return s.Take(now, lim, cost)
}

// Bytes returns 0: a fixed window holds no heap.
func (*FixedWindow) Bytes() int { return 0 }
