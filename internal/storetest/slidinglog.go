package storetest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// ExactLogRates are the limits RunSlidingLogExact checks: one unit, the
// old entry budget of the log (64), a common hourly quota and the largest
// the property reaches in seconds.
var ExactLogRates = []int{1, 64, 1000, 100_000}

// RunSlidingLogExact is the sliding log's property under rapid: at every
// limit of ExactLogRates, on random arrivals (many at one instant, many
// within a hair of each other, some a period apart) and costs (for the large
// limits, costs that reach the limit in a few requests, beside cost-1
// requests), each decision is the exact definition's: a request is
// admitted if and only if the units admitted in (now−Period, now] plus its
// cost are at most Rate. So no window of length Period ever holds more than
// Rate units, and no request the definition admits is refused. Remaining,
// and RetryAfter of a refusal (the time until enough admitted units have
// left the window), are the definition's too. resolution is the store's
// clock (time.Microsecond for Redis): arrivals fall on its multiples.
// realTTL says the store expires a key on its own clock (Redis does, at the
// instant its newest entry leaves): the suite's clock then never stops
// within ttlSlack before that instant, where the store's clock, which does
// not stop, would expire the key early; it moves on to the instant itself,
// the boundary, which it still checks.
func RunSlidingLogExact(t *testing.T, newStore NewStore, resolution time.Duration, realTTL bool) {
	for _, rate := range ExactLogRates {
		t.Run("rate="+strconv.Itoa(rate), func(t *testing.T) {
			clock := clocktest.New()
			s := newStore(t, clock)
			lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: rate, Period: time.Minute}
			// Keys unique to this test, as a shared server may hold the
			// keys of an earlier one under its own clock.
			prefix := "exact:" + strconv.Itoa(rate) + ":" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
			run := 0
			rapid.Check(t, func(rt *rapid.T) {
				run++
				key := prefix + strconv.Itoa(run)
				clock.Advance(2 * lim.Period) // nothing of the last run is in a window
				checkExactLog(rt, s, clock, key, lim, resolution, realTTL)
			})
		})
	}
}

// ttlSlack is how long before a key's expiry on the store's own clock
// RunSlidingLogExact never stops its clock: far more than a decision takes.
const ttlSlack = 5 * time.Second

// admittedAt is one admitted request of the reference log.
type admittedAt struct {
	at   time.Time
	cost int
}

// checkExactLog plays one random run on key and compares every decision
// with the reference.
func checkExactLog(t *rapid.T, s sluice.Limiter, clock *clocktest.Clock, key string, lim sluice.Limit, res time.Duration, realTTL bool) {
	ctx := context.Background()
	steps := rapid.IntRange(1, 60).Draw(t, "steps")
	ticks := int64(lim.Period / res)
	var log []admittedAt
	for i := range steps {
		// Advance: none (the same instant), a tick or a few, a slice of
		// the period, or about a period (so entries leave one by one).
		var adv int64
		switch rapid.IntRange(0, 3).Draw(t, "advance-kind") {
		case 1:
			adv = rapid.Int64Range(1, 3).Draw(t, "ticks")
		case 2:
			adv = rapid.Int64Range(1, ticks/8).Draw(t, "slice")
		case 3:
			adv = rapid.Int64Range(ticks-3, ticks+3).Draw(t, "period")
		}
		now := clock.Advance(time.Duration(adv) * res)
		if n := len(log); realTTL && n > 0 {
			if gone := log[n-1].at.Add(lim.Period); now.Before(gone) && gone.Sub(now) <= ttlSlack {
				clock.Set(gone)
				now = gone
			}
		}
		cost := 1
		if lim.Rate > 1 && rapid.Bool().Draw(t, "large") {
			cost = rapid.IntRange(1, lim.Rate).Draw(t, "cost")
		}
		// The exact definition: the units admitted in (now−Period, now].
		live := 0
		for len(log) > 0 && !log[0].at.After(now.Add(-lim.Period)) {
			log = log[1:]
		}
		for _, a := range log {
			live += a.cost
		}
		want := live+cost <= lim.Rate
		r, err := s.AllowN(ctx, key, lim, cost)
		if err != nil {
			t.Fatalf("step %d: AllowN(%d) at %v: %v", i, cost, now, err)
		}
		if r.Allowed != want {
			t.Fatalf("step %d: AllowN(%d) with %d of %d admitted in the last %v = %+v, want allowed %v", i, cost, live, lim.Rate, lim.Period, r, want)
		}
		if want {
			log = append(log, admittedAt{now, cost})
			if r.Remaining != lim.Rate-live-cost {
				t.Fatalf("step %d: AllowN(%d) = Remaining %d, want %d", i, cost, r.Remaining, lim.Rate-live-cost)
			}
			continue
		}
		// Refused: the wait ends when the oldest admitted units that must
		// leave for cost to fit have left.
		need, j := live+cost-lim.Rate, 0
		for ; need > log[j].cost; j++ {
			need -= log[j].cost
		}
		if wait := log[j].at.Add(lim.Period).Sub(now); r.RetryAfter != wait || r.Remaining != lim.Rate-live {
			t.Fatalf("step %d: AllowN(%d) with %d admitted = %+v, want RetryAfter %v, Remaining %d", i, cost, live, r, wait, lim.Rate-live)
		}
	}
}
