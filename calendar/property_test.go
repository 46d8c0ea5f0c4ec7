package calendar_test

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
)

// zones mixes ordinary zones with the odd ones: a 30-minute daylight saving
// shift, changes at midnight, a skipped day, a zone west of UTC and one
// far east of it.
var zones = []string{
	"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
	"America/Santiago", "America/Havana", "Pacific/Apia", "Asia/Kolkata",
	"Pacific/Kiritimati", "America/St_Johns", "Europe/London", "Asia/Tehran",
}

func genCalendar(t *rapid.T) sluice.Calendar {
	loc, err := time.LoadLocation(rapid.SampledFrom(zones).Draw(t, "zone"))
	if err != nil {
		t.Fatal(err)
	}
	c := sluice.Calendar{Location: loc, Unit: sluice.CalendarUnit(rapid.IntRange(1, 5).Draw(t, "unit"))}
	switch c.Unit {
	case sluice.CalendarWeek:
		c.FirstWeekday = sluice.WeekStart(rapid.IntRange(0, 7).Draw(t, "first"))
	case sluice.CalendarMonth:
		c.AnchorDay = uint8(rapid.IntRange(0, 31).Draw(t, "anchor"))
	case sluice.CalendarQuarter, sluice.CalendarYear:
		c.AnchorDay = uint8(rapid.IntRange(0, 31).Draw(t, "anchor"))
		c.AnchorMonth = uint8(rapid.IntRange(0, 12).Draw(t, "anchorMonth"))
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// genInstant draws an instant between 1900 and 2200, biased towards the
// zone-change seasons by drawing the second too.
func genInstant(t *rapid.T) time.Time {
	lo := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	hi := time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	sec := rapid.Int64Range(lo, hi).Draw(t, "unix")
	ns := rapid.Int64Range(0, 999_999_999).Draw(t, "ns")
	return time.Unix(sec, ns)
}

// maxLength bounds a period of unit u: its longest calendar length plus two
// days for zone changes (Samoa's skipped day, a zone that moved by a day).
func maxLength(u sluice.CalendarUnit) time.Duration {
	const day = 24 * time.Hour
	longest := map[sluice.CalendarUnit]time.Duration{
		sluice.CalendarDay: day, sluice.CalendarWeek: 7 * day, sluice.CalendarMonth: 31 * day,
		sluice.CalendarQuarter: 92 * day, sluice.CalendarYear: 366 * day,
	}[u]
	return longest + 2*day
}

// TestPeriodsTileTime: for any calendar and instant, the instant lies in
// its period; the period that follows starts exactly where it ends and the
// one before ends exactly where it starts (no gap, no overlap), so every
// instant falls in exactly one period; and walking from period to period
// gives the same periods as asking for each.
func TestPeriodsTileTime(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCalendar(t)
		at := genInstant(t)
		start, end := calendar.Period(c, at)
		if at.Before(start) || !at.Before(end) {
			t.Fatalf("%v: %v is not in its period [%v, %v)", c, at, start, end)
		}
		if l := end.Sub(start); l <= 0 || l > maxLength(c.Unit) {
			t.Fatalf("%v: period [%v, %v) lasts %v", c, start, end, l)
		}
		nextStart, nextEnd := calendar.Period(c, end)
		if !nextStart.Equal(end) {
			t.Fatalf("%v: period [%v, %v) is followed by one starting at %v", c, start, end, nextStart)
		}
		prevStart, prevEnd := calendar.Period(c, start.Add(-time.Nanosecond))
		if !prevEnd.Equal(start) {
			t.Fatalf("%v: period [%v, %v) is preceded by [%v, %v)", c, start, end, prevStart, prevEnd)
		}
		for _, edge := range []time.Time{start, end.Add(-time.Nanosecond)} {
			if s, e := calendar.Period(c, edge); !s.Equal(start) || !e.Equal(end) {
				t.Fatalf("%v: %v lies in [%v, %v), its neighbour %v in [%v, %v)", c, edge, start, end, at, s, e)
			}
		}
		// Walk a few periods forward from the next one.
		s, e := nextStart, nextEnd
		for range 8 {
			s2, e2 := calendar.Period(c, e)
			if !s2.Equal(e) || !e2.After(s2) {
				t.Fatalf("%v: after [%v, %v) comes [%v, %v)", c, s, e, s2, e2)
			}
			s, e = s2, e2
		}
	})
}

// TestStartMatchesPeriod: Start(Index(t)) is the start Period reports for
// every instant whose local date is its period's (all but the instants in a
// wall clock that went back across midnight), so callers that number
// periods (a ledger) agree with callers that ask for one.
func TestStartMatchesPeriod(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCalendar(t)
		at := genInstant(t)
		start, end := calendar.Period(c, at)
		n := calendar.Index(c, at)
		if calendar.Index(c, start) != n {
			return // a wall clock that went back across midnight: see Period
		}
		if s := calendar.Start(c, n); !s.Equal(start) {
			t.Fatalf("%v: Start(Index(%v)) = %v, Period says %v", c, at, s, start)
		}
		if e := calendar.Start(c, n+1); !e.Equal(end) {
			t.Fatalf("%v: Start(Index(%v)+1) = %v, Period says %v", c, at, e, end)
		}
	})
}

// TestCivilArithmeticMatchesTime: the calendar's day numbers agree with the
// time package's for every day from 1600 to 2400 (through Index and Start
// on a UTC day calendar).
func TestCivilArithmeticMatchesTime(t *testing.T) {
	c := sluice.Calendar{Location: time.UTC, Unit: sluice.CalendarDay}
	for d := time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC); d.Year() < 2400; d = d.AddDate(0, 0, 1) {
		n := calendar.Index(c, d)
		if want := d.Unix() / 86400; n != want { // midnight UTC: a whole number of days
			t.Fatalf("%v: day %d, want %d", d, n, want)
		}
		if s := calendar.Start(c, n); !s.Equal(d) {
			t.Fatalf("Start(%d) = %v, want %v", n, s, d)
		}
	}
}
