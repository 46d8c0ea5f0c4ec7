package algorithm_test

import (
	"testing"
	"time"
	_ "time/tzdata"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

func berlinMonth15(t *testing.T) sluice.Limit {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	lim := sluice.PerCalendar(3, sluice.Calendar{Location: loc, Unit: sluice.CalendarMonth, AnchorDay: 15})
	if err := lim.Validate(); err != nil {
		t.Fatal(err)
	}
	return lim
}

// TestCalendarWindowResetsAtThePeriodsEnd: a fixed window with a Berlin
// month anchored on the 15th spends its rate, denies with RetryAfter and
// ResetAfter exactly the time to 15 April 00:00 Berlin time (a period that
// crosses the change to summer time, so 31 days less an hour from its
// start), and admits again from that instant, not a 30-day multiple.
func TestCalendarWindowResetsAtThePeriodsEnd(t *testing.T) {
	lim := berlinMonth15(t)
	loc := lim.Calendar.Location
	boundary := time.Date(2026, 4, 15, 0, 0, 0, 0, loc)
	now := time.Date(2026, 4, 14, 22, 0, 0, 0, loc) // two hours before
	var s algorithm.FixedWindow
	for i := range 3 {
		if res := s.Take(now.UnixNano(), lim, 1); !res.Allowed || res.Remaining != 2-i {
			t.Fatalf("take %d: %+v", i, res)
		}
	}
	res := s.Take(now.UnixNano(), lim, 1)
	if res.Allowed || res.RetryAfter != 2*time.Hour || res.ResetAfter != 2*time.Hour {
		t.Fatalf("over the rate: %+v, want denied with RetryAfter and ResetAfter 2h", res)
	}
	if got := time.Unix(0, s.Expires()); !got.Equal(boundary) {
		t.Fatalf("Expires %v, want %v", got, boundary)
	}
	if res := s.Take(boundary.Add(-time.Nanosecond).UnixNano(), lim, 1); res.Allowed || res.RetryAfter != time.Nanosecond {
		t.Fatalf("a nanosecond before the end: %+v", res)
	}
	res = s.Take(boundary.UnixNano(), lim, 1)
	wantReset := time.Date(2026, 5, 15, 0, 0, 0, 0, loc).Sub(boundary)
	if !res.Allowed || res.Remaining != 2 || res.ResetAfter != wantReset {
		t.Fatalf("at the boundary: %+v, want admitted with 2 left and ResetAfter %v", res, wantReset)
	}
	if wantReset != 30*24*time.Hour {
		t.Fatalf("15 April to 15 May lasts %v", wantReset)
	}
}

// TestCalendarWindowPeekAndRefund: a peek reports the period without
// spending, and a refund gives units back only within the period they were
// spent in.
func TestCalendarWindowPeekAndRefund(t *testing.T) {
	lim := berlinMonth15(t)
	loc := lim.Calendar.Location
	now := time.Date(2026, 3, 20, 12, 0, 0, 0, loc)
	end := time.Date(2026, 4, 15, 0, 0, 0, 0, loc)
	var s algorithm.FixedWindow
	s.Take(now.UnixNano(), lim, 2)
	if res := s.Peek(now.UnixNano(), lim); !res.Allowed || res.Remaining != 1 || res.ResetAfter != end.Sub(now) {
		t.Fatalf("peek: %+v, want 1 left, ResetAfter %v", res, end.Sub(now))
	}
	s.Refund(now.Add(time.Hour).UnixNano(), lim, 1)
	if res := s.Peek(now.UnixNano(), lim); res.Remaining != 2 {
		t.Fatalf("after a refund in the period: %+v, want 2 left", res)
	}
	s.Refund(end.UnixNano(), lim, 1) // the next period: nothing to give back
	if res := s.Peek(now.UnixNano(), lim); res.Remaining != 2 {
		t.Fatalf("after a refund past the period: %+v, want still 2 left", res)
	}
}

// TestCalendarWindowClockBack: when the clock goes back into the previous
// period, the reading counts in the current period, which keeps its count
// and its end (ResetAfter is the time to that end); when the clock comes
// forward again the period does not start afresh. Before, the window moved
// to the previous period with the current count, and the next forward
// reading started the current period at 0: the fourth request of a limit
// of 3 was admitted.
func TestCalendarWindowClockBack(t *testing.T) {
	lim := berlinMonth15(t)
	loc := lim.Calendar.Location
	var s algorithm.FixedWindow
	for i, st := range []struct {
		at    time.Time
		cost  int
		allow bool
	}{
		{time.Date(2026, 4, 14, 23, 0, 0, 0, loc), 3, true}, // the period before, full
		{time.Date(2026, 4, 15, 1, 0, 0, 0, loc), 1, true},  // this period: 1 of 3
		{time.Date(2026, 4, 14, 23, 0, 0, 0, loc), 2, true}, // back: counts here, 3 of 3
		{time.Date(2026, 4, 10, 0, 0, 0, 0, loc), 1, false},
		{time.Date(2026, 4, 15, 2, 0, 0, 0, loc), 1, false}, // forward: still full
	} {
		end := time.Date(2026, 5, 15, 0, 0, 0, 0, loc)
		if i == 0 {
			end = time.Date(2026, 4, 15, 0, 0, 0, 0, loc)
		}
		res := s.Take(st.at.UnixNano(), lim, st.cost)
		if res.Allowed != st.allow || res.ResetAfter != end.Sub(st.at) {
			t.Fatalf("step %d: AllowN(%v, %d) = %+v, want allowed %v with ResetAfter %v",
				i, st.at, st.cost, res, st.allow, end.Sub(st.at))
		}
	}
}

// TestCalendarDayAcrossDST: a Berlin day limit's windows last 23 h on the
// day clocks go forward and 25 h on the day they go back.
func TestCalendarDayAcrossDST(t *testing.T) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	lim := sluice.PerCalendar(1, sluice.Calendar{Location: loc, Unit: sluice.CalendarDay})
	for _, tc := range []struct {
		day  time.Time
		want time.Duration
	}{
		{time.Date(2026, 3, 29, 0, 0, 0, 0, loc), 23 * time.Hour},
		{time.Date(2026, 10, 25, 0, 0, 0, 0, loc), 25 * time.Hour},
		{time.Date(2026, 6, 1, 0, 0, 0, 0, loc), 24 * time.Hour},
	} {
		var s algorithm.FixedWindow
		if res := s.Take(tc.day.UnixNano(), lim, 1); !res.Allowed || res.ResetAfter != tc.want {
			t.Errorf("%v: %+v, want ResetAfter %v", tc.day, res, tc.want)
		}
	}
}

// BenchmarkCalendarWindow is a decision of a calendar month's window late
// in its period (the end is known: no zone arithmetic) and early in it
// (the period is recomputed: ~1 µs), beside an epoch-aligned window.
func BenchmarkCalendarWindow(b *testing.B) {
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	cal := sluice.PerCalendar(1<<40, sluice.Calendar{Location: loc, Unit: sluice.CalendarMonth})
	plain := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1 << 40, Period: cal.Period}
	for _, tc := range []struct {
		name string
		lim  sluice.Limit
		at   time.Time
	}{
		{"epoch", plain, time.Date(2026, 3, 20, 0, 0, 0, 0, loc)},
		{"calendar/late", cal, time.Date(2026, 3, 20, 0, 0, 0, 0, loc)},
		{"calendar/early", cal, time.Date(2026, 3, 2, 0, 0, 0, 0, loc)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var s algorithm.FixedWindow
			now := tc.at.UnixNano()
			for b.Loop() {
				s.Take(now, tc.lim, 1)
			}
		})
	}
}

// TestFixedWindowPeriodIsTakesWindow: FixedWindowPeriod names the window
// Take counts in, with and without a calendar: its end is where Take
// resets.
func TestFixedWindowPeriodIsTakesWindow(t *testing.T) {
	cal := berlinMonth15(t)
	plain := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 3, Period: cal.Period}
	at := time.Date(2026, 3, 29, 12, 0, 0, 0, cal.Calendar.Location).UnixNano()
	for _, lim := range []sluice.Limit{cal, plain} {
		start, end := algorithm.FixedWindowPeriod(lim, at)
		var s algorithm.FixedWindow
		res := s.Take(at, lim, 1)
		if start > at || end <= at || res.ResetAfter != time.Duration(end-at) || s.Expires() != end {
			t.Errorf("%v: [%d, %d) around %d; Take reset in %v", lim, start, end, at, res.ResetAfter)
		}
	}
	if start, end := algorithm.FixedWindowPeriod(cal, at); time.Duration(end-start) != 31*24*time.Hour-time.Hour {
		t.Errorf("the Berlin month from 15 March lasts %v", time.Duration(end-start))
	}
}

// TestCalendarWindowMatchesModel: on a clock that moves forward by random
// steps (seconds to weeks) through random zones and units, a calendar
// window admits exactly what a model does that counts per calendar.Period
// (with no shortcut), and reports ResetAfter to that period's end: the
// shortcuts that skip the zone arithmetic never change a decision.
func TestCalendarWindowMatchesModel(t *testing.T) {
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago", "America/Havana", "Pacific/Apia"}
	rapid.Check(t, func(t *rapid.T) {
		loc, err := time.LoadLocation(rapid.SampledFrom(zones).Draw(t, "zone"))
		if err != nil {
			t.Fatal(err)
		}
		c := sluice.Calendar{Location: loc, Unit: sluice.CalendarUnit(rapid.IntRange(1, 5).Draw(t, "unit"))}
		if c.Unit >= sluice.CalendarMonth {
			c.AnchorDay = uint8(rapid.IntRange(0, 31).Draw(t, "anchor"))
		}
		rate := rapid.IntRange(1, 5).Draw(t, "rate")
		lim := sluice.PerCalendar(rate, c)
		now := time.Date(rapid.IntRange(2008, 2030).Draw(t, "year"), time.Month(rapid.IntRange(1, 12).Draw(t, "month")), 1, 0, 0, 0, 0, time.UTC).UnixNano()
		var s algorithm.FixedWindow
		counts := map[int64]int{} // period end → units spent
		for i := range 60 {
			longest := int64(10 * 24 * time.Hour)
			if rapid.Bool().Draw(t, "small") { // many decisions in one period, some across its end
				longest = int64(time.Hour)
			}
			now += rapid.Int64Range(1, longest).Draw(t, "step")
			_, end := algorithm.FixedWindowPeriod(lim, now)
			res := s.Take(now, lim, 1)
			want := counts[end] < rate
			if res.Allowed != want || res.ResetAfter != time.Duration(end-now) {
				t.Fatalf("step %d at %v: %+v, want allowed %v, ResetAfter %v", i, time.Unix(0, now).In(loc), res, want, time.Duration(end-now))
			}
			if want {
				counts[end]++
			}
		}
	})
}
