package sluice_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// LogEntries is a sliding log's worst case in entries: its rate when
// exact, the slots that meet a window with a Precision if fewer, 0 for the
// other algorithms; Validate takes a Precision on a sliding log only, from
// a nanosecond to the period.
func TestLogEntriesAndPrecision(t *testing.T) {
	log := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 100_000, Period: time.Hour}
	for _, c := range []struct {
		lim  sluice.Limit
		want int
		ok   bool
	}{
		{log, 100_000, true},
		{withPrecision(log, time.Second), 3601, true},
		{withPrecision(log, 1500*time.Millisecond), 2401, true},
		{withPrecision(log, time.Millisecond), 100_000, true}, // 3,600,001 slots: the rate is fewer
		{withPrecision(log, time.Hour), 2, true},
		{withPrecision(log, time.Hour+1), 0, false},
		{withPrecision(log, -time.Second), 0, false},
		{sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Hour}, 0, true},
		{sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Hour, Precision: time.Second}, 0, false},
	} {
		err := c.lim.Validate()
		if (err == nil) != c.ok || err != nil && !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Errorf("%v: Validate() = %v, want ok %v", c.lim, err, c.ok)
		}
		if c.ok {
			if got := c.lim.LogEntries(); got != c.want {
				t.Errorf("%v: LogEntries() = %d, want %d", c.lim, got, c.want)
			}
		}
	}
	if got, want := withPrecision(log, time.Second).String(), "sliding_log 100000/1h0m0s precision 1s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func withPrecision(l sluice.Limit, p time.Duration) sluice.Limit { l.Precision = p; return l }

// A bucketed sliding window with a calendar is refused as any sliding
// window with a calendar is: the bucket check once passed it on without
// looking at the calendar, and memstore and Redis then decided it two
// different ways.
func TestBucketedLimitWithACalendarIsRefused(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: 24 * time.Hour, Buckets: 4,
		Calendar: sluice.Calendar{Location: time.UTC, Unit: sluice.CalendarDay}}
	if err := lim.Validate(); !errors.Is(err, sluice.ErrInvalidLimit) {
		t.Fatalf("Validate(%+v) = %v, want an error wrapping ErrInvalidLimit", lim, err)
	}
}
