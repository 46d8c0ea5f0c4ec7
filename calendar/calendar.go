// Package calendar is the math of calendar periods: given a sluice.Calendar
// (a unit, a time zone, an anchor) and an instant, it returns the period
// [start, end) that holds the instant.
//
// A period starts at the first instant whose local wall clock reads its first
// day's midnight or later. That is local midnight on an ordinary day; on a
// day whose midnight falls in a daylight saving gap it is the end of the gap;
// when midnight occurs twice it is the first. So a day lasts 23 or 25 hours
// across a daylight saving change (23h30 or 24h30 on Lord Howe Island), and
// consecutive periods tile time: each period ends where the next starts, and
// every instant lies in exactly one.
//
// Months are counted on the calendar, never by adding durations: a month
// anchored on the 31st starts on the 31st where there is one and on the
// month's last day where there is not (February 28 or 29, April 30), and a
// yearly period anchored on February 29 starts on February 28 in common
// years. Weeks start on ISO 8601's Monday or on a chosen weekday.
//
// The package uses only the standard library's time zone data, through the
// *time.Location the Calendar holds; it never calls time.Now.
package calendar

import (
	"time"

	"github.com/sluicehq/sluice"
)

// Period returns the period of c that holds t: start ≤ t < end, both in c's
// location. c must be valid and not zero (see sluice.Calendar.Validate); for
// the zero Calendar it returns two zero Times.
func Period(c sluice.Calendar, t time.Time) (start, end time.Time) {
	if c.Unit == sluice.NoCalendar || c.Unit.Nominal() == 0 {
		return time.Time{}, time.Time{}
	}
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	n := index(c, t.In(loc))
	start, end = Start(c, n), Start(c, n+1)
	// The wall clock can go back across midnight (a daylight saving change
	// at 00:30 back to 23:30), so an instant whose local date is in period n
	// may lie after period n+1's first instant: move on. Periods are at
	// least a day long, so a step or two is always enough.
	for i := 0; i < 4 && !t.Before(end); i++ {
		n++
		start, end = end, Start(c, n+1)
	}
	for i := 0; i < 4 && t.Before(start); i++ {
		n--
		start, end = Start(c, n), start
	}
	return start, end
}

// Start returns the first instant of period n of c: n counts days from
// 1970-01-01, weeks from the one holding that day, and months, quarters or
// years from the one starting in year 0 (see Index). Consecutive n give strictly increasing
// starts except where a zone skipped a whole day (Samoa skipped 2011-12-30),
// where a period is empty.
func Start(c sluice.Calendar, n int64) time.Time {
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := firstDay(c, n)
	return dayStart(y, m, d, loc)
}

// Index returns the number of the period of c whose days hold t's local
// date (in c's location), the n that Start takes. Period is what most
// callers want: around a wall clock that goes back across midnight, an
// instant's local date and the period it lies in can differ.
func Index(c sluice.Calendar, t time.Time) int64 {
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	return index(c, t.In(loc))
}

// index is Index on a t already in c's location.
func index(c sluice.Calendar, t time.Time) int64 {
	y, m, d := t.Date()
	switch c.Unit {
	case sluice.CalendarDay:
		return civilDay(y, m, d)
	case sluice.CalendarWeek:
		return floorDiv(civilDay(y, m, d)-weekOffset(c), 7)
	}
	k, m0 := months(c)
	month := int64(y)*12 + int64(m) - 1
	s := month - floorMod(month-m0, k)
	sy, sm, sd := anchorDate(s, c.AnchorDay)
	if civilDay(y, m, d) < civilDay(sy, sm, sd) {
		s -= k
	}
	return floorDiv(s-m0, k)
}

// firstDay returns the civil date period n of c starts on.
func firstDay(c sluice.Calendar, n int64) (int, time.Month, int) {
	switch c.Unit {
	case sluice.CalendarDay:
		return civilDate(n)
	case sluice.CalendarWeek:
		return civilDate(n*7 + weekOffset(c))
	}
	k, m0 := months(c)
	return anchorDate(n*k+m0, c.AnchorDay)
}

// months returns the length in months of a month, quarter or year, and the
// month (counted from January of year 0, modulo that length) periods start
// in.
func months(c sluice.Calendar) (k, m0 int64) {
	switch c.Unit {
	case sluice.CalendarQuarter:
		k = 3
	case sluice.CalendarYear:
		k = 12
	default:
		return 1, 0
	}
	if c.AnchorMonth > 0 {
		m0 = int64(c.AnchorMonth-1) % k
	}
	return k, m0
}

// weekOffset returns a day number, 0 to 6, that falls on c's first weekday.
// Day 0, 1970-01-01, was a Thursday.
func weekOffset(c sluice.Calendar) int64 {
	return floorMod(int64(c.FirstWeekday.Weekday())-int64(time.Thursday), 7)
}

// anchorDate returns the date in month number s (months since January of
// year 0) with day anchor, clamped to the month's last day; anchor 0 is 1.
func anchorDate(s int64, anchor uint8) (int, time.Month, int) {
	y, m := int(floorDiv(s, 12)), time.Month(floorMod(s, 12)+1)
	d := max(int(anchor), 1)
	return y, m, min(d, daysIn(y, m))
}

// daysIn returns the number of days in month m of year y.
func daysIn(y int, m time.Month) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// civilDay returns the number of days from 1970-01-01 to the given date in
// the proleptic Gregorian calendar, by arithmetic on 400-year eras of
// 146097 days whose years start on March 1 (so that the leap day is a
// year's last): the same as time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix()
// / 86400 for a valid date, at a fraction of its cost.
func civilDay(y int, m time.Month, d int) int64 {
	yy := int64(y)
	if m <= time.February {
		yy--
	}
	era := floorDiv(yy, 400)
	yoe := yy - era*400                    // [0, 399]
	mp := (int64(m) + 9) % 12              // March = 0
	doy := (153*mp+2)/5 + int64(d) - 1     // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468       // 719468: 0000-03-01 to 1970-01-01
}

// civilDate is civilDay's inverse.
func civilDate(n int64) (int, time.Month, int) {
	n += 719468
	era := floorDiv(n, 146097)
	doe := n - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // [0, 365]
	mp := (5*doy + 2) / 153                                // March = 0
	d := doy - (153*mp+2)/5 + 1
	m := (mp+2)%12 + 1
	y := yoe + era*400
	if m <= 2 {
		y++
	}
	return int(y), time.Month(m), int(d)
}

// dayStart returns the first instant at which the wall clock in loc reads
// midnight of y-m-d or later. It walks the zone's spans of constant offset
// (time.Time.ZoneBounds) from well before that midnight: in each span the
// wall clock is the instant plus the span's offset, so the first span that
// reaches the midnight holds the answer. Offsets stay within ±26 hours, so
// the walk starts 27 hours early and crosses a few spans at most.
func dayStart(y int, m time.Month, d int, loc *time.Location) time.Time {
	wall := civilDay(y, m, d) * 86400 // midnight as if in UTC
	u := time.Unix(wall-27*3600, 0).In(loc)
	for range 64 {
		spanStart, spanEnd := u.ZoneBounds()
		_, off := u.Zone()
		x := wall - int64(off) // the instant whose wall clock reads midnight in this span
		if !spanStart.IsZero() && x < spanStart.Unix() {
			x = spanStart.Unix() // the span starts past midnight: a gap ends here
		}
		if spanEnd.IsZero() || x < spanEnd.Unix() {
			return time.Unix(x, 0).In(loc)
		}
		u = spanEnd
	}
	// Unreachable with real zone data: no zone changes offset 64 times in
	// two days. Go's own answer is a sound fallback.
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func floorMod(a, b int64) int64 { return a - floorDiv(a, b)*b }
