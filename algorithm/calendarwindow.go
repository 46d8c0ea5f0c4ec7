package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
)

// takeCalendar is FixedWindow.Take for a limit with a Calendar: the window
// is the calendar period that holds now (package calendar), so a month is a
// month in its time zone, a day is 23 or 25 hours across a daylight saving
// change, and ResetAfter is the exact time to the period's end. The state is
// the same End and Count as an epoch-aligned window's.
//
// The period is computed only when it may have changed: when now reaches
// End, or when End is further away than the unit's shortest period and
// now's local date is in neither of the two periods before End's (the clock
// went back more than a period, or the limit changed). Otherwise now is
// decided in the period ending at End (see within), and a decision costs what an epoch-aligned one does, or a little more
// early in a period. (After a limit changes to a calendar, an End that the
// old limit set and that is near is trusted until it passes.)
func (s *FixedWindow) takeCalendar(now int64, lim sluice.Limit, cost int) sluice.Result {
	if now >= s.End || s.End-now > int64(shortest(lim.Calendar.Unit)) && !within(lim.Calendar, now, s.End, s.Count > 0) {
		_, end := calendar.Period(lim.Calendar, time.Unix(0, now))
		if e := end.UnixNano(); e != s.End {
			if now >= s.End {
				s.Count = 0 // a new period
			}
			// Else the clock went back or the calendar changed: move to the
			// period that holds now but keep the count, conservatively, as
			// an epoch-aligned window does.
			s.End = e
		}
	}
	return s.spend(now, int64(lim.Rate), cost)
}

// within reports whether now, before end, lies in the period of c that
// ends at end, a period boundary, or, if counted, in the period before it
// (the clock stepped back less than a period): whether now's local date
// falls in one of the two periods before the one end's local date falls in. Either way
// now is decided in the period ending at end; moving to the earlier period
// would lose its count to this one's, and this one would start afresh when
// the clock came back. Local dates are cheap (no zone transitions to find),
// and an instant whose local date is in a period is never before that
// period's start; where a wall clock goes back across midnight the dates
// say no and the caller computes the period.
func within(c sluice.Calendar, now, end int64, counted bool) bool {
	d := calendar.Index(c, time.Unix(0, end)) - calendar.Index(c, time.Unix(0, now))
	return d == 1 || d == 2 && counted
}

// shortest returns a length no calendar period of unit u is shorter than,
// leaving room for daylight saving changes and for a zone that skipped a
// day: a period this far from its end or further must be recomputed.
func shortest(u sluice.CalendarUnit) time.Duration {
	const day = 24 * time.Hour
	switch u {
	case sluice.CalendarDay:
		return 20 * time.Hour // 23 h or 23h30 across daylight saving
	case sluice.CalendarWeek:
		return 5 * day // a week that lost a day to a zone's move across the date line
	case sluice.CalendarMonth:
		return 27 * day
	case sluice.CalendarQuarter:
		return 88 * day
	}
	return 363 * day
}

// FixedWindowPeriod returns the window of a FixedWindow limit that holds
// now, in Unix nanoseconds: [start, end). Without a Calendar it is the
// multiple of Period since the Unix epoch that FixedWindow.Take counts in;
// with one, the calendar period (package calendar). A store that keeps its
// counters elsewhere (a database row per period) computes the window here,
// so that it counts in the windows the memory store does. (After the clock
// steps back into the window before, FixedWindow.Take counts in the later
// one; a row per period counts in the earlier, whose count it still has.)
func FixedWindowPeriod(lim sluice.Limit, now int64) (start, end int64) {
	if lim.Calendar.Unit == sluice.NoCalendar {
		p := int64(lim.Period)
		start = windowStart(now, p)
		return start, start + p
	}
	s, e := calendar.Period(lim.Calendar, time.Unix(0, now))
	return s.UnixNano(), e.UnixNano()
}
