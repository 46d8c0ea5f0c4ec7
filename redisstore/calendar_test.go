package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// openCalendarStore returns a store on a real redis-server (the package's
// shared one) with cfg, whose scripts and calendar take the time from clock
// (nil: Redis's TIME and the host's clock).
func openCalendarStore(t *testing.T, cfg redisstore.Config, clock sluice.Clock) (*redisstore.Store, *redistest.Server) {
	t.Helper()
	srv := redistest.Single(t)
	cfg.URL = "redis://" + srv.Addr
	return openConfig(t, cfg, clock), srv
}

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestCalendarMonthOnRedis: storetest's Berlin calendar month on a real
// redis-server, on a fake clock; the key lives until the period's end and
// no longer.
func TestCalendarMonthOnRedis(t *testing.T) {
	storetest.RunCalendarMonth(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter {
		s, _ := openCalendarStore(t, redisstore.Config{}, clock)
		return s
	}, storetest.Options{Resolution: time.Microsecond})
	loc := berlin(t)
	clock := clocktest.At(time.Date(2026, 1, 31, 22, 0, 0, 0, loc))
	s, srv := openCalendarStore(t, redisstore.Config{}, clock)
	key := "calendar-month:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	lim := sluice.PerCalendar(5, sluice.Calendar{Location: loc, Unit: sluice.CalendarMonth})
	if res, err := s.AllowN(context.Background(), key, lim, 5); err != nil || !res.Allowed {
		t.Fatalf("spending the month: %+v, %v", res, err)
	}
	pttl, err := strconv.ParseInt(strings.TrimSpace(srv.Do(t, "PTTL", s.Key(sluice.FixedWindow, key))), 10, 64)
	if err != nil || pttl <= 0 || pttl > 2*3600*1000 {
		t.Errorf("PTTL %d ms (%v), want in (0, 2h]", pttl, err)
	}
}

// TestCalendarAgreesWithHostPeriods: on Redis's own clock, a Berlin day
// limit admits its rate and reports ResetAfter within a second of the end
// of the Berlin day the host computes; under envoyproxy/ratelimit's key
// format too, where a calendar window keeps Sluice's key (envoyproxy has
// no calendar periods to share).
func TestCalendarAgreesWithHostPeriods(t *testing.T) {
	for _, format := range []redisstore.KeyFormat{redisstore.KeySluice, redisstore.KeyEnvoy} {
		s, srv := openCalendarStore(t, redisstore.Config{KeyFormat: format}, nil)
		lim := sluice.PerCalendar(3, sluice.Calendar{Location: berlin(t), Unit: sluice.CalendarDay})
		key := "calendar-day:" + strconv.FormatInt(time.Now().UnixNano(), 36)
		admitted := 0
		for range 5 {
			before := time.Now()
			res, err := s.Allow(context.Background(), key, lim)
			if err != nil {
				t.Fatal(err)
			}
			_, end := calendar.Period(lim.Calendar, before)
			if want := end.Sub(before); res.ResetAfter > want || res.ResetAfter < want-time.Second {
				t.Errorf("format %v: ResetAfter %v, want about %v", format, res.ResetAfter, want)
			}
			if res.Allowed {
				admitted++
			}
		}
		if admitted != 3 {
			t.Errorf("format %v: admitted %d of 5, want 3", format, admitted)
		}
		if got := strings.TrimSpace(srv.Do(t, "EXISTS", s.Key(sluice.FixedWindow, key))); got != "1" {
			t.Errorf("format %v: the calendar window's key %q: EXISTS %s", format, s.Key(sluice.FixedWindow, key), got)
		}
	}
}

// TestCalendarHostClockOff: the host computes periods from its own clock
// and Redis counts by its own: a host two seconds ahead of Redis, or two
// behind, still has Redis count in the period that holds Redis's time, so
// a quota spent in January stays spent until Redis's clock reaches Berlin's
// midnight, and no longer.
func TestCalendarHostClockOff(t *testing.T) {
	loc := berlin(t)
	midnight := time.Date(2026, 2, 1, 0, 0, 0, 0, loc)
	for _, skew := range []time.Duration{2 * time.Second, -2 * time.Second} {
		redisClock := clocktest.At(midnight.Add(-10 * time.Second))
		s, _ := openCalendarStore(t, redisstore.Config{}, redisClock)
		redisstore.SetGuessClock(s, func() time.Time { return redisClock.Now().Add(skew) })
		key := "calendar-skew:" + strconv.FormatInt(time.Now().UnixNano(), 36)
		lim := sluice.PerCalendar(2, sluice.Calendar{Location: loc, Unit: sluice.CalendarMonth})
		allow := func() sluice.Result {
			t.Helper()
			res, err := s.Allow(context.Background(), key, lim)
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		allow()
		if res := allow(); !res.Allowed || res.ResetAfter != 10*time.Second {
			t.Fatalf("skew %v: spending January: %+v, want ResetAfter 10s", skew, res)
		}
		redisClock.Set(midnight.Add(-time.Second)) // host: 23:59:59 + skew
		if res := allow(); res.Allowed || res.RetryAfter != time.Second {
			t.Fatalf("skew %v: a second before Redis's midnight: %+v, want denied, RetryAfter 1s", skew, res)
		}
		redisClock.Set(midnight.Add(time.Second)) // host: 00:00:01 + skew
		if res := allow(); !res.Allowed || res.ResetAfter != 28*24*time.Hour-time.Second {
			t.Fatalf("skew %v: a second after Redis's midnight: %+v, want admitted in February", skew, res)
		}
	}
}
