package calendar_test

import (
	"testing"
	"time"
	_ "time/tzdata" // the same zone data on every machine the tests run on

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
)

func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func instant(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return v
}

// TestPeriodTable pins the period holding an instant, and its length, at
// month ends with anchors 29, 30 and 31, in February of leap and common
// years, across daylight saving changes in Berlin, New York, Lord Howe
// (30 minutes), Santiago and Havana (at midnight) and Samoa's skipped day,
// at year end and in ISO weeks 53.
func TestPeriodTable(t *testing.T) {
	const (
		day   = sluice.CalendarDay
		week  = sluice.CalendarWeek
		month = sluice.CalendarMonth
		qtr   = sluice.CalendarQuarter
		year  = sluice.CalendarYear
	)
	cases := []struct {
		name        string
		zone        string
		unit        sluice.CalendarUnit
		anchor      uint8
		anchorMonth uint8
		first       sluice.WeekStart
		at          string
		start, end  string
		length      time.Duration
	}{
		{"month plain", "Europe/Berlin", month, 0, 0, 0, "2026-01-31T12:00:00+01:00", "2026-01-01T00:00:00+01:00", "2026-02-01T00:00:00+01:00", 744 * time.Hour},
		{"anchor 31 mid February is January's period", "UTC", month, 31, 0, 0, "2026-02-15T00:00:00Z", "2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", 28 * 24 * time.Hour},
		{"anchor 31 clamps to February 28 in a common year", "UTC", month, 31, 0, 0, "2026-02-28T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z", 31 * 24 * time.Hour},
		{"anchor 31 clamps to February 29 in a leap year", "UTC", month, 31, 0, 0, "2024-02-29T10:00:00Z", "2024-02-29T00:00:00Z", "2024-03-31T00:00:00Z", 31 * 24 * time.Hour},
		{"anchor 31 the day before leap day", "UTC", month, 31, 0, 0, "2024-02-28T23:59:59Z", "2024-01-31T00:00:00Z", "2024-02-29T00:00:00Z", 29 * 24 * time.Hour},
		{"anchor 31 clamps to April 30", "UTC", month, 31, 0, 0, "2026-04-30T00:00:00Z", "2026-04-30T00:00:00Z", "2026-05-31T00:00:00Z", 31 * 24 * time.Hour},
		{"anchor 31 April 29 is March's period", "UTC", month, 31, 0, 0, "2026-04-29T23:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z", 30 * 24 * time.Hour},
		{"anchor 30 clamps to February 28", "UTC", month, 30, 0, 0, "2026-03-01T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-30T00:00:00Z", 30 * 24 * time.Hour},
		{"anchor 30 clamps to February 29 in a leap year", "UTC", month, 30, 0, 0, "2024-02-29T12:00:00Z", "2024-02-29T00:00:00Z", "2024-03-30T00:00:00Z", 30 * 24 * time.Hour},
		{"anchor 30 January", "UTC", month, 30, 0, 0, "2026-01-30T00:00:00Z", "2026-01-30T00:00:00Z", "2026-02-28T00:00:00Z", 29 * 24 * time.Hour},
		{"anchor 29 clamps to February 28 in a common year", "UTC", month, 29, 0, 0, "2026-02-28T12:00:00Z", "2026-02-28T00:00:00Z", "2026-03-29T00:00:00Z", 29 * 24 * time.Hour},
		{"anchor 29 before the clamp", "UTC", month, 29, 0, 0, "2026-02-27T12:00:00Z", "2026-01-29T00:00:00Z", "2026-02-28T00:00:00Z", 30 * 24 * time.Hour},
		{"anchor 29 in a leap year", "UTC", month, 29, 0, 0, "2024-02-28T12:00:00Z", "2024-01-29T00:00:00Z", "2024-02-29T00:00:00Z", 31 * 24 * time.Hour},
		{"February in a common year", "UTC", month, 0, 0, 0, "2026-02-14T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", 28 * 24 * time.Hour},
		{"February in a leap year", "UTC", month, 0, 0, 0, "2024-02-29T23:59:59Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z", 29 * 24 * time.Hour},
		{"Berlin month anchored on the 15th across spring forward", "Europe/Berlin", month, 15, 0, 0, "2026-03-29T12:00:00+02:00", "2026-03-15T00:00:00+01:00", "2026-04-15T00:00:00+02:00", 31*24*time.Hour - time.Hour},
		{"Berlin month anchored on the 15th across fall back", "Europe/Berlin", month, 15, 0, 0, "2026-11-14T23:59:59+01:00", "2026-10-15T00:00:00+02:00", "2026-11-15T00:00:00+01:00", 31*24*time.Hour + time.Hour},
		{"Berlin spring forward day is 23 h", "Europe/Berlin", day, 0, 0, 0, "2026-03-29T12:00:00+02:00", "2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 23 * time.Hour},
		{"Berlin fall back day is 25 h", "Europe/Berlin", day, 0, 0, 0, "2026-10-25T12:00:00+01:00", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25 * time.Hour},
		{"Berlin repeated hour, second time", "Europe/Berlin", day, 0, 0, 0, "2026-10-25T02:30:00+01:00", "2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00", 25 * time.Hour},
		{"New York spring forward day is 23 h", "America/New_York", day, 0, 0, 0, "2026-03-08T03:30:00-04:00", "2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00", 23 * time.Hour},
		{"New York fall back day is 25 h", "America/New_York", day, 0, 0, 0, "2026-11-01T01:30:00-05:00", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 25 * time.Hour},
		{"New York 2011 spring forward", "America/New_York", day, 0, 0, 0, "2011-03-13T01:59:59-05:00", "2011-03-13T00:00:00-05:00", "2011-03-14T00:00:00-04:00", 23 * time.Hour},
		{"Lord Howe spring forward day is 23h30", "Australia/Lord_Howe", day, 0, 0, 0, "2024-10-06T02:45:00+11:00", "2024-10-06T00:00:00+10:30", "2024-10-07T00:00:00+11:00", 23*time.Hour + 30*time.Minute},
		{"Lord Howe fall back day is 24h30", "Australia/Lord_Howe", day, 0, 0, 0, "2025-04-06T01:45:00+10:30", "2025-04-06T00:00:00+11:00", "2025-04-07T00:00:00+10:30", 24*time.Hour + 30*time.Minute},
		{"Lord Howe month across fall back", "Australia/Lord_Howe", month, 0, 0, 0, "2025-04-30T23:59:00+10:30", "2025-04-01T00:00:00+11:00", "2025-05-01T00:00:00+10:30", 30*24*time.Hour + 30*time.Minute},
		{"Santiago midnight in a gap: the day starts at 01:00", "America/Santiago", day, 0, 0, 0, "2026-09-06T12:00:00-03:00", "2026-09-06T01:00:00-03:00", "2026-09-07T00:00:00-03:00", 23 * time.Hour},
		{"Santiago the day before the gap", "America/Santiago", day, 0, 0, 0, "2026-09-05T23:59:59-04:00", "2026-09-05T00:00:00-04:00", "2026-09-06T01:00:00-03:00", 24 * time.Hour},
		{"Havana midnight twice: the day starts at the first", "America/Havana", day, 0, 0, 0, "2026-11-01T00:30:00-05:00", "2026-11-01T00:00:00-04:00", "2026-11-02T00:00:00-05:00", 25 * time.Hour},
		{"Samoa skipped December 30, 2011", "Pacific/Apia", day, 0, 0, 0, "2011-12-29T23:59:59-10:00", "2011-12-29T00:00:00-10:00", "2011-12-31T00:00:00+14:00", 24 * time.Hour},
		{"ISO week 53 of 2020 on New Year's Eve", "UTC", week, 0, 0, 0, "2020-12-31T12:00:00Z", "2020-12-28T00:00:00Z", "2021-01-04T00:00:00Z", 7 * 24 * time.Hour},
		{"ISO week 53 of 2020 on New Year's Day", "UTC", week, 0, 0, 0, "2021-01-01T00:00:00Z", "2020-12-28T00:00:00Z", "2021-01-04T00:00:00Z", 7 * 24 * time.Hour},
		{"ISO week 53 of 2026 ends on January 3", "UTC", week, 0, 0, 0, "2027-01-03T23:59:59Z", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z", 7 * 24 * time.Hour},
		{"ISO week 1 of 2025 starts in 2024", "UTC", week, 0, 0, 0, "2024-12-30T00:00:00Z", "2024-12-30T00:00:00Z", "2025-01-06T00:00:00Z", 7 * 24 * time.Hour},
		{"week from Sunday", "UTC", week, 0, 0, sluice.WeekStartingOn(time.Sunday), "2026-12-01T09:00:00Z", "2026-11-29T00:00:00Z", "2026-12-06T00:00:00Z", 7 * 24 * time.Hour},
		{"Berlin ISO week across spring forward is 167 h", "Europe/Berlin", week, 0, 0, 0, "2026-03-25T10:00:00+01:00", "2026-03-23T00:00:00+01:00", "2026-03-30T00:00:00+02:00", 167 * time.Hour},
		{"Berlin year end, last second", "Europe/Berlin", year, 0, 0, 0, "2026-12-31T23:59:59+01:00", "2026-01-01T00:00:00+01:00", "2027-01-01T00:00:00+01:00", 365 * 24 * time.Hour},
		{"Berlin new year, first instant", "Europe/Berlin", year, 0, 0, 0, "2027-01-01T00:00:00+01:00", "2027-01-01T00:00:00+01:00", "2028-01-01T00:00:00+01:00", 365 * 24 * time.Hour},
		{"New York year end is already next year in UTC", "America/New_York", year, 0, 0, 0, "2027-01-01T04:30:00Z", "2026-01-01T00:00:00-05:00", "2027-01-01T00:00:00-05:00", 365 * 24 * time.Hour},
		{"leap year", "UTC", year, 0, 0, 0, "2024-07-01T00:00:00Z", "2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z", 366 * 24 * time.Hour},
		{"year anchored on February 29 in a common year", "UTC", year, 29, 2, 0, "2025-03-01T00:00:00Z", "2025-02-28T00:00:00Z", "2026-02-28T00:00:00Z", 365 * 24 * time.Hour},
		{"year anchored on February 29 from a leap day", "UTC", year, 29, 2, 0, "2024-03-01T00:00:00Z", "2024-02-29T00:00:00Z", "2025-02-28T00:00:00Z", 365 * 24 * time.Hour},
		{"quarter", "UTC", qtr, 0, 0, 0, "2026-05-20T00:00:00Z", "2026-04-01T00:00:00Z", "2026-07-01T00:00:00Z", 91 * 24 * time.Hour},
		{"quarter from February 15 across year end", "UTC", qtr, 15, 2, 0, "2026-01-10T00:00:00Z", "2025-11-15T00:00:00Z", "2026-02-15T00:00:00Z", 92 * 24 * time.Hour},
		{"Berlin quarter across spring forward", "Europe/Berlin", qtr, 0, 0, 0, "2026-03-31T23:30:00+02:00", "2026-01-01T00:00:00+01:00", "2026-04-01T00:00:00+02:00", 90*24*time.Hour - time.Hour},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sluice.Calendar{Location: zone(t, tc.zone), Unit: tc.unit, AnchorDay: tc.anchor, AnchorMonth: tc.anchorMonth, FirstWeekday: tc.first}
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			at := instant(t, tc.at)
			start, end := calendar.Period(c, at)
			if want := instant(t, tc.start); !start.Equal(want) {
				t.Errorf("start %v, want %v", start, want)
			}
			if want := instant(t, tc.end); !end.Equal(want) {
				t.Errorf("end %v, want %v", end, want)
			}
			if got := end.Sub(start); got != tc.length {
				t.Errorf("length %v, want %v", got, tc.length)
			}
			if at.Before(start) || !at.Before(end) {
				t.Errorf("%v is not in [%v, %v)", at, start, end)
			}
			if start.Location() != c.Location {
				t.Errorf("start in %v, want the calendar's %v", start.Location(), c.Location)
			}
		})
	}
	if len(cases) < 30 {
		t.Fatalf("%d cases; the table should keep at least 30", len(cases))
	}
}
