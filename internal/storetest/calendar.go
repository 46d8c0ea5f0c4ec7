package storetest

import (
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin wherever the tests run

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// RunCalendarMonth checks a quota of 5 per calendar month in Europe/Berlin
// on a store whose clock the test moves: spent out late on 31 January, it
// is denied with RetryAfter exactly to Berlin's midnight (23:00 UTC, not
// UTC's midnight), still denied one opts.Resolution before it, admitted
// again from that instant with ResetAfter the length of February; a peek
// agrees, and a refund in February gives its unit back.
func RunCalendarMonth(t *testing.T, newStore NewStore, opts Options) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	res := max(opts.Resolution, 1)
	clock := clocktest.At(time.Date(2026, 1, 31, 22, 0, 0, 0, berlin))
	store := newStore(t, clock)
	key := keyOf(t)
	lim := sluice.PerCalendar(5, sluice.Calendar{Location: berlin, Unit: sluice.CalendarMonth})
	if r := allow(t, store, key, lim, 5); !r.Allowed || r.Remaining != 0 || r.ResetAfter != 2*time.Hour {
		t.Fatalf("spending the month: %s, want admitted, 0 left, ResetAfter 2h", show(r))
	}
	clock.Set(time.Date(2026, 1, 31, 23, 30, 0, 0, berlin))
	if r := allow(t, store, key, lim, 1); r.Allowed || r.RetryAfter != 30*time.Minute || r.ResetAfter != 30*time.Minute {
		t.Fatalf("half an hour before Berlin's midnight: %s, want denied, RetryAfter and ResetAfter 30m", show(r))
	}
	midnight := time.Date(2026, 2, 1, 0, 0, 0, 0, berlin)
	clock.Set(midnight.Add(-res))
	if r := allow(t, store, key, lim, 1); r.Allowed || r.RetryAfter != res {
		t.Fatalf("%v before Berlin's midnight: %s, want denied, RetryAfter %v", res, show(r), res)
	}
	clock.Set(midnight)
	february := 28 * 24 * time.Hour
	if r := allow(t, store, key, lim, 1); !r.Allowed || r.Remaining != 4 || r.ResetAfter != february {
		t.Fatalf("at Berlin's midnight: %s, want admitted, 4 left, ResetAfter %v", show(r), february)
	}
	if p := peek(t, store, key, lim); p.Remaining != 4 || p.ResetAfter != february {
		t.Fatalf("peek: %s, want 4 left, ResetAfter %v", show(p), february)
	}
	refund(t, store, key, lim, 1)
	if r := allow(t, store, key, lim, 5); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("after a refund: %s, want 5 admitted", show(r))
	}
}
