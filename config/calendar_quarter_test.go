package config_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zones load the same on a machine without a zone database

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// quarterDoc is a fiscal quarter of 3 requests in New York: quarters
// start on 1 February, May, August and November.
const quarterDoc = `domain: billing
descriptors:
  - key: tenant
    rate_limit:
      unit: quarter
      requests_per_unit: 3
      calendar: {time_zone: America/New_York, anchor_month: 2}
`

// TestCalendarQuarterDecidedAcrossBoundary: unit quarter with a calendar
// block compiles to a calendar quarter in its zone, and memstore, on a
// fake clock, spends it out before New York's midnight of 1 May (04:00
// UTC), denies until exactly that instant, then admits a fresh quarter
// whose reset is 1 August, New York time.
func TestCalendarQuarterDecidedAcrossBoundary(t *testing.T) {
	d, err := config.Parse("billing.yaml", []byte(quarterDoc))
	if err != nil {
		t.Fatal(err)
	}
	r := d.Lookup([]config.Entry{{Key: "tenant", Value: "acme"}})
	if r == nil {
		t.Fatal("no rule for tenant")
	}
	ny := r.Limit.Calendar.Location
	want := sluice.PerCalendar(3, sluice.Calendar{Location: ny, Unit: sluice.CalendarQuarter, AnchorMonth: 2}).WithBurst(3)
	if r.Unit != config.Quarter || r.Limit != want || ny.String() != "America/New_York" {
		t.Fatalf("rule: unit %v, limit %v; want quarter, %v", r.Unit, r.Limit, want)
	}
	boundary := time.Date(2026, 5, 1, 0, 0, 0, 0, ny)
	if boundary.UTC().Hour() != 4 {
		t.Fatalf("New York's midnight of 1 May is %v, want 04:00 UTC", boundary.UTC())
	}
	clock := clocktest.At(boundary.Add(-2 * time.Hour))
	store := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer store.Close()
	ctx := context.Background()
	allow := func(cost int) sluice.Result {
		t.Helper()
		res, err := store.AllowN(ctx, "tenant:acme", r.Limit, cost)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := allow(3); !res.Allowed || res.Remaining != 0 || res.ResetAfter != 2*time.Hour {
		t.Fatalf("spending the quarter: %+v, want admitted, 0 left, ResetAfter 2h", res)
	}
	clock.Set(boundary.Add(-time.Nanosecond))
	if res := allow(1); res.Allowed || res.RetryAfter != time.Nanosecond {
		t.Fatalf("a nanosecond before the quarter ends: %+v, want denied, RetryAfter 1ns", res)
	}
	clock.Set(boundary)
	res := allow(1)
	next := time.Date(2026, 8, 1, 0, 0, 0, 0, ny).Sub(boundary) // May, June, July: 92 days
	if !res.Allowed || res.Remaining != 2 || res.ResetAfter != next || next != 92*24*time.Hour {
		t.Fatalf("at the new quarter: %+v, want admitted, 2 left, ResetAfter %v", res, next)
	}
}

// TestQuarterWithoutCalendarIsFileLineError: envoyproxy/ratelimit has no
// quarter, and a quarter has no fixed length, so unit quarter without a
// calendar block is refused at the unit's line rather than read as some
// number of days.
func TestQuarterWithoutCalendarIsFileLineError(t *testing.T) {
	doc := strings.Replace(quarterDoc, "      calendar: {time_zone: America/New_York, anchor_month: 2}\n", "", 1)
	_, err := config.Parse("billing.yaml", []byte(doc))
	var ce *config.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err %v, want a *config.Error", err)
	}
	if ce.Line != 5 || !strings.HasPrefix(err.Error(), "billing.yaml:5:") || !strings.Contains(err.Error(), "calendar") {
		t.Errorf("err %q (line %d), want billing.yaml:5: naming the calendar block", err, ce.Line)
	}
}

// TestQuarterKeepsPlainUnitsEnvoys: adding quarter leaves every
// envoyproxy/ratelimit unit its fixed length and a plain config's rule
// without a calendar.
func TestQuarterKeepsPlainUnitsEnvoys(t *testing.T) {
	for u, want := range map[string]time.Duration{"second": time.Second, "minute": time.Minute, "hour": time.Hour, "day": 24 * time.Hour, "week": 7 * 24 * time.Hour, "month": 30 * 24 * time.Hour, "year": 365 * 24 * time.Hour} {
		doc := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: " + u + "\n      requests_per_unit: 1\n"
		d, err := config.Parse("plain.yaml", []byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		r := d.Lookup([]config.Entry{{Key: "k", Value: "v"}})
		if r.Limit.Period != want || !r.Limit.Calendar.IsZero() {
			t.Errorf("unit %s: %v, want %v and no calendar", u, r.Limit, want)
		}
	}
}
