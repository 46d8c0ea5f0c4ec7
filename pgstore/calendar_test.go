package pgstore_test

import (
	"context"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, wherever the tests run

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/storetest"
)

// TestCalendarPeriodsAgreeWithTheAlgorithm: for limits with a calendar (a
// month anchored on the 31st in Berlin, a day in New York, a week starting
// on Sunday in Lord Howe's half-hour daylight saving), every decision of a
// walk across period boundaries and daylight saving changes matches package
// algorithm's FixedWindow exactly (Allowed, Remaining, RetryAfter and the
// exact ResetAfter), and each period is a ledger row with the period's
// bounds.
func TestCalendarPeriodsAgreeWithTheAlgorithm(t *testing.T) {
	load := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	for _, tc := range []struct {
		name  string
		cal   sluice.Calendar
		start time.Time
		step  time.Duration
	}{
		{"month-anchor-31-berlin", sluice.Calendar{Location: load("Europe/Berlin"), Unit: sluice.CalendarMonth, AnchorDay: 31},
			time.Date(2028, 1, 20, 0, 0, 0, 0, time.UTC), 97 * time.Hour},
		{"day-new-york", sluice.Calendar{Location: load("America/New_York"), Unit: sluice.CalendarDay},
			time.Date(2026, 3, 7, 12, 0, 0, 0, time.UTC), 5 * time.Hour},
		{"week-sunday-lord-howe", sluice.Calendar{Location: load("Australia/Lord_Howe"), Unit: sluice.CalendarWeek, FirstWeekday: sluice.WeekStartingOn(time.Sunday)},
			time.Date(2026, 9, 28, 0, 0, 0, 0, time.UTC), 31 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 4, Period: tc.cal.Unit.Nominal(), Calendar: tc.cal}
			if err := lim.Validate(); err != nil {
				t.Fatal(err)
			}
			clock := clocktest.At(tc.start)
			s, _ := open(t, clock)
			var ref algorithm.FixedWindow
			ctx := context.Background()
			periods := map[time.Time]bool{}
			for i := range 60 {
				cost := 1 + i%3
				now := clock.Now()
				want := ref.Take(now.UnixNano(), lim, cost)
				got, err := s.AllowN(ctx, "cal", lim, cost)
				if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Fatalf("step %d at %v: AllowN(%d) = %+v, the algorithm says %+v", i, now.In(tc.cal.Location), cost, got, want)
				}
				if want.Allowed {
					periods[time.Unix(0, ref.End).UTC()] = true
				}
				clock.Advance(tc.step)
			}
			u, err := s.Usage(ctx, "cal")
			if err != nil {
				t.Fatal(err)
			}
			if len(u) != len(periods) {
				t.Fatalf("the ledger has %d periods, the walk admitted in %d", len(u), len(periods))
			}
			for _, p := range u {
				if !periods[p.End.UTC()] {
					t.Errorf("ledger period %v–%v ends where no admitted period did", p.Start, p.End)
				}
			}
		})
	}
}

// TestCalendarMonth: storetest's Berlin calendar month on PostgreSQL, whose
// timestamps keep microseconds.
func TestCalendarMonth(t *testing.T) {
	storetest.RunCalendarMonth(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter {
		s, _ := open(t, clock)
		return s
	}, storetest.Options{Resolution: time.Microsecond})
}
