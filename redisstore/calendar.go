package redisstore

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/calendar"
)

// calendarScript decides a fixed window over calendar periods
// (scripts/calendar_window.lua).
var calendarScript = rueidis.NewLuaScript(scriptText("calendar_window.lua"))

// execCalendar runs a limit with a Calendar: Go computes the host's current
// period and the next one's end with its zone data (package calendar;
// Redis has none), and the script counts in the one that holds Redis's
// now. The key is the fixed window's (Key(sluice.FixedWindow, key)), so a
// key's count carries over when its limit gains or loses a calendar, as
// in the memory store. Under KeyEnvoy too: envoyproxy/ratelimit has no
// calendar periods to share.
func (s *Store) execCalendar(ctx context.Context, mode, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	params, err := s.params(lim) // the nominal period in microseconds, the rate
	if err != nil {
		return sluice.Result{}, err
	}
	p := hostPeriods(lim.Calendar, s.hostNow())
	args := []string{mode, s.nowArg(), p.startArg, params[1], strconv.Itoa(cost), p.endArg, p.nextArg}
	parts := s.keyParts(algorithms[sluice.FixedWindow].short, key)
	resp := execOnKey(ctx, s.client, calendarScript, args, parts[:]...)
	return decode(resp)
}

// periods is a calendar's period that holds some instant, and the next
// period's end; with each instant in microseconds since the Unix epoch,
// formatted as the script's argument. Period boundaries are whole seconds
// (zone offsets are), so nothing is rounded.
type periods struct {
	cal                       sluice.Calendar
	start, end                time.Time
	startArg, endArg, nextArg string
}

// lastPeriods caches the periods computed last (the common case: one hot
// calendar, many decisions in one period), so that a decision does not
// pay for the zone arithmetic (about 1 µs) nor the formatting every time.
var lastPeriods atomic.Pointer[periods]

// hostPeriods returns the period of c that holds now and the next period's
// end.
func hostPeriods(c sluice.Calendar, now time.Time) *periods {
	if p := lastPeriods.Load(); p != nil && p.cal == c && !now.Before(p.start) && now.Before(p.end) {
		return p
	}
	start, end := calendar.Period(c, now)
	_, next := calendar.Period(c, end)
	p := &periods{cal: c, start: start, end: end, startArg: micros(start), endArg: micros(end), nextArg: micros(next)}
	lastPeriods.Store(p)
	return p
}

// micros formats t in microseconds since the Unix epoch.
func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }
