package sluice_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/sluicehq/sluice"
)

// TestZeroCalendarIsNoCalendar: a Limit without a Calendar validates and
// prints as before, and the zero Calendar says so.
func TestZeroCalendarIsNoCalendar(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Minute}
	if err := lim.Validate(); err != nil || !lim.Calendar.IsZero() || lim.String() != "fixed_window 100/1m0s" {
		t.Fatalf("%v: %v, IsZero %v", lim, err, lim.Calendar.IsZero())
	}
}

// TestCalendarLimitsAreComparable: limits with calendars compare with ==
// and key maps; the same zone loaded once compares equal.
func TestCalendarLimitsAreComparable(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	a := sluice.PerCalendar(10, sluice.Calendar{Location: berlin, Unit: sluice.CalendarMonth, AnchorDay: 15})
	b := sluice.PerCalendar(10, sluice.Calendar{Location: berlin, Unit: sluice.CalendarMonth, AnchorDay: 15})
	c := sluice.PerCalendar(10, sluice.Calendar{Location: berlin, Unit: sluice.CalendarMonth, AnchorDay: 16})
	m := map[sluice.Limit]int{a: 1}
	if a != b || m[b] != 1 || a == c {
		t.Fatalf("a == b %v, a == c %v", a == b, a == c)
	}
	if got, want := a.String(), "fixed_window 10/calendar month Europe/Berlin anchor 15"; got != want {
		t.Errorf("String %q, want %q", got, want)
	}
}

// TestCalendarValidation: every combination a calendar cannot serve is
// refused with ErrInvalidLimit and a message naming the field, and the
// combinations it serves pass.
func TestCalendarValidation(t *testing.T) {
	cal := func(c sluice.Calendar) sluice.Limit { return sluice.PerCalendar(5, c) }
	ok := []sluice.Limit{
		cal(sluice.Calendar{Unit: sluice.CalendarDay}),
		cal(sluice.Calendar{Unit: sluice.CalendarWeek, FirstWeekday: sluice.WeekStartingOn(time.Sunday)}),
		cal(sluice.Calendar{Unit: sluice.CalendarMonth, AnchorDay: 31}),
		cal(sluice.Calendar{Unit: sluice.CalendarQuarter, AnchorDay: 1, AnchorMonth: 2}),
		cal(sluice.Calendar{Unit: sluice.CalendarYear, AnchorDay: 29, AnchorMonth: 2}),
	}
	for _, lim := range ok {
		if err := lim.Validate(); err != nil {
			t.Errorf("%v: %v", lim, err)
		}
	}
	month := sluice.Calendar{Unit: sluice.CalendarMonth}
	const m30 = 30 * 24 * time.Hour
	bad := []struct {
		want string // a substring of the error
		lim  sluice.Limit
	}{
		{"without a calendar unit", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Hour, Calendar: sluice.Calendar{AnchorDay: 3}}},
		{"unknown calendar unit", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: m30, Calendar: sluice.Calendar{Unit: 9}}},
		{"first weekday applies only to a week", cal(sluice.Calendar{Unit: sluice.CalendarMonth, FirstWeekday: sluice.WeekStartingOn(time.Friday)})},
		{"unknown first weekday", cal(sluice.Calendar{Unit: sluice.CalendarWeek, FirstWeekday: 8})},
		{"anchor day 32", cal(sluice.Calendar{Unit: sluice.CalendarMonth, AnchorDay: 32})},
		{"anchor day applies", cal(sluice.Calendar{Unit: sluice.CalendarWeek, AnchorDay: 2})},
		{"anchor month 13", cal(sluice.Calendar{Unit: sluice.CalendarYear, AnchorMonth: 13})},
		{"anchor month applies", cal(sluice.Calendar{Unit: sluice.CalendarMonth, AnchorMonth: 2})},
		{"applies only to fixed_window", sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 1, Period: m30, Calendar: month}},
		{"applies only to fixed_window", sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1, Burst: 1, Period: m30, Calendar: month}},
		{"applies only to fixed_window", sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 1, Period: m30, Calendar: month}},
		{"must be its nominal 720h0m0s", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: 31 * 24 * time.Hour, Calendar: month}},
		{"rate 0", sluice.Limit{Algorithm: sluice.FixedWindow, Period: m30, Calendar: month}},
		{"count-rejected", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: m30, CountRejected: true, Calendar: month}},
	}
	for _, tc := range bad {
		if err := tc.lim.Validate(); !errors.Is(err, sluice.ErrInvalidLimit) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want ErrInvalidLimit saying %q", tc.lim, err, tc.want)
		}
	}
}

// TestWeekStart: the zero WeekStart is ISO 8601's Monday, and
// WeekStartingOn names every weekday.
func TestWeekStart(t *testing.T) {
	if sluice.ISOWeek.Weekday() != time.Monday {
		t.Errorf("ISOWeek starts on %v", sluice.ISOWeek.Weekday())
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if got := sluice.WeekStartingOn(d).Weekday(); got != d {
			t.Errorf("WeekStartingOn(%v).Weekday() = %v", d, got)
		}
	}
	for u, want := range map[sluice.CalendarUnit]time.Duration{sluice.NoCalendar: 0, sluice.CalendarDay: 24 * time.Hour, sluice.CalendarMonth: 720 * time.Hour, sluice.CalendarYear: 8760 * time.Hour} {
		if got := u.Nominal(); got != want {
			t.Errorf("%v.Nominal() = %v, want %v", u, got, want)
		}
	}
}
