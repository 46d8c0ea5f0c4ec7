package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// TestCalendarMonthAcrossBoundary: a quota of 5 per calendar month in
// Europe/Berlin, decided by the store on a fake clock: spent out late on 31
// January, denied with RetryAfter exactly to Berlin's midnight (23:00 UTC,
// not UTC's), admitted again from that instant with ResetAfter the length of
// February, and a peek agrees.
func TestCalendarMonthAcrossBoundary(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktest.At(time.Date(2026, 1, 31, 22, 0, 0, 0, berlin))
	store := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer store.Close()
	ctx := context.Background()
	lim := sluice.PerCalendar(5, sluice.Calendar{Location: berlin, Unit: sluice.CalendarMonth})
	allow := func(cost int) sluice.Result {
		t.Helper()
		res, err := store.AllowN(ctx, "tenant:acme", lim, cost)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := allow(5); !res.Allowed || res.Remaining != 0 || res.ResetAfter != 2*time.Hour {
		t.Fatalf("spending the month: %+v, want admitted, 0 left, ResetAfter 2h", res)
	}
	clock.Set(time.Date(2026, 1, 31, 23, 30, 0, 0, time.UTC).Add(-time.Hour)) // 23:30 Berlin
	if res := allow(1); res.Allowed || res.RetryAfter != 30*time.Minute {
		t.Fatalf("half an hour before Berlin's midnight: %+v, want denied, RetryAfter 30m", res)
	}
	midnight := time.Date(2026, 2, 1, 0, 0, 0, 0, berlin)
	clock.Set(midnight.Add(-time.Nanosecond))
	if res := allow(1); res.Allowed || res.RetryAfter != time.Nanosecond {
		t.Fatalf("a nanosecond before: %+v", res)
	}
	clock.Set(midnight)
	res := allow(1)
	if want := 28 * 24 * time.Hour; !res.Allowed || res.Remaining != 4 || res.ResetAfter != want {
		t.Fatalf("at Berlin's midnight: %+v, want admitted, 4 left, ResetAfter %v", res, want)
	}
	peek, err := store.Peek(ctx, "tenant:acme", lim)
	if err != nil {
		t.Fatal(err)
	}
	if peek.Remaining != 4 || peek.ResetAfter != 28*24*time.Hour {
		t.Fatalf("peek: %+v", peek)
	}
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
