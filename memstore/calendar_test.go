package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
)

// TestCalendarMonthAcrossBoundary: storetest's Berlin calendar month,
// decided by the store on a fake clock to the nanosecond.
func TestCalendarMonthAcrossBoundary(t *testing.T) {
	storetest.RunCalendarMonth(t, newStore, storetest.Options{})
}

// TestCalendarAnchoredMonthAcrossDST: a month anchored on the 15th crosses
// the change to summer time, so it lasts 31 days less an hour; the store
// resets at 15 April 00:00 Berlin time, not 30 or 31 whole days after 15
// March.
func TestCalendarAnchoredMonthAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 15, 0, 0, 0, 0, berlin)
	clock := clocktest.At(start)
	store := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer store.Close()
	lim := sluice.PerCalendar(1, sluice.Calendar{Location: berlin, Unit: sluice.CalendarMonth, AnchorDay: 15})
	res, err := store.AllowN(context.Background(), "k", lim, 1)
	if want := 31*24*time.Hour - time.Hour; err != nil || !res.Allowed || res.ResetAfter != want {
		t.Fatalf("first call: %+v, %v; want admitted with ResetAfter %v", res, err, want)
	}
	clock.Set(start.Add(31*24*time.Hour - time.Hour - time.Second))
	if res, err := store.AllowN(context.Background(), "k", lim, 1); err != nil || res.Allowed || res.RetryAfter != time.Second {
		t.Fatalf("a second before 15 April: %+v, %v", res, err)
	}
	clock.Set(time.Date(2026, 4, 15, 0, 0, 0, 0, berlin))
	if res, err := store.AllowN(context.Background(), "k", lim, 1); err != nil || !res.Allowed {
		t.Fatalf("15 April 00:00 Berlin: %+v, %v; want admitted", res, err)
	}
}

// TestCalendarLimitOnlyOnFixedWindow: a calendar on another algorithm, or
// with a Period other than its unit's nominal length, is refused as bad
// input rather than ignored.
func TestCalendarLimitOnlyOnFixedWindow(t *testing.T) {
	store := memstore.New(memstore.Config{SweepInterval: -1})
	defer store.Close()
	cal := sluice.Calendar{Unit: sluice.CalendarDay}
	for _, lim := range []sluice.Limit{
		{Algorithm: sluice.TokenBucket, Rate: 1, Burst: 1, Period: 24 * time.Hour, Calendar: cal},
		{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Hour, Calendar: cal},
	} {
		if _, err := store.AllowN(context.Background(), "k", lim, 1); !errors.Is(err, sluice.ErrBadInput) {
			t.Errorf("%v: err %v, want bad input", lim, err)
		}
	}
}
