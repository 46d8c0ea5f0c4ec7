package algorithm_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// op is a step of a refund table: a Take (checked against want) or, with
// refund set, a Refund; either way Expires is checked afterwards against
// expires (as an offset from t0, or 0 for "fresh now").
type op struct {
	refund  bool
	at      time.Duration
	cost    int
	want    outcome
	expires time.Duration
}

func runOps(t *testing.T, s state, lim sluice.Limit, ops []op) {
	t.Helper()
	for i, o := range ops {
		now := t0 + int64(o.at)
		if o.refund {
			s.Refund(now, lim, o.cost)
		} else if got := outcomeOf(s.Take(now, lim, o.cost)); got != o.want {
			t.Errorf("step %d: AllowN(t0+%v, %v) = %v, want %v", i, o.at, o.cost, got, o.want)
		}
		want := int64(0)
		if o.expires != 0 {
			want = t0 + int64(o.expires)
		}
		if got := s.Expires(); got != want {
			t.Errorf("step %d: Expires() = t0%+d, want t0%+d", i, got-t0, want-t0)
		}
	}
}

func take(at time.Duration, cost int, want outcome, expires time.Duration) op {
	return op{at: at, cost: cost, want: want, expires: expires}
}

func refund(at time.Duration, cost int, expires time.Duration) op {
	return op{refund: true, at: at, cost: cost, expires: expires}
}

func TestRefundSteps(t *testing.T) {
	const ms = time.Millisecond
	t.Run("token_bucket", func(t *testing.T) {
		runOps(t, new(algorithm.TokenBucket), sluice.PerSecond(5).WithBurst(10), []op{
			take(0, 10, ok(0, 2*time.Second), 2*time.Second),
			refund(0, 3, 1400*ms),
			take(0, 1, ok(2, 1600*ms), 1600*ms),
			// Never beyond a full bucket.
			refund(100*ms, 100, 0),
			take(100*ms, 10, ok(0, 2*time.Second), 2100*ms),
		})
	})
	t.Run("fixed_window", func(t *testing.T) {
		lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: time.Minute}
		runOps(t, new(algorithm.FixedWindow), lim, []op{
			take(59*time.Second, 5, ok(0, time.Second), time.Minute),
			refund(59*time.Second, 2, time.Minute),
			take(59*time.Second, 2, ok(0, time.Second), time.Minute),
			// Units spent in a past window are not given to the next.
			refund(time.Minute, 2, time.Minute),
			take(time.Minute, 5, ok(0, time.Minute), 2*time.Minute),
			take(time.Minute, 1, no(0, time.Minute, time.Minute), 2*time.Minute),
			refund(time.Minute, 9, 0),
			take(time.Minute, 5, ok(0, time.Minute), 2*time.Minute),
		})
	})
	t.Run("sliding_window", func(t *testing.T) {
		lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 4, Period: time.Second}
		runOps(t, new(algorithm.SlidingWindow), lim, []op{
			take(500*ms, 4, ok(0, 1500*ms), 2*time.Second),
			refund(500*ms, 1, 2*time.Second),
			take(500*ms, 1, ok(0, 1500*ms), 2*time.Second),
			refund(1500*ms, 3, 2*time.Second), // a new window: the previous one keeps its count
			take(1500*ms, 3, no(2, 1, 500*ms), 2*time.Second),
			take(1500*ms+1, 3, ok(0, 1500*ms-1), 3*time.Second),
			refund(1500*ms+1, 3, 2*time.Second),
			take(2*time.Second, 4, ok(0, 2*time.Second), 4*time.Second),
		})
	})
	t.Run("sliding_log", func(t *testing.T) {
		lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 3, Period: time.Second}
		runOps(t, new(algorithm.SlidingLog), lim, []op{
			take(0, 1, ok(2, time.Second), time.Second),
			take(500*ms, 1, ok(1, time.Second), 1500*ms),
			refund(500*ms, 1, 1500*ms), // the oldest entry goes
			take(500*ms, 2, ok(0, time.Second), 1500*ms),
			take(time.Second, 2, no(0, 500*ms, 500*ms), 1500*ms),
			refund(2*time.Second, 5, 0),
		})
	})
	t.Run("leaky_bucket", func(t *testing.T) {
		runOps(t, new(algorithm.LeakyBucket), leaky(1, time.Second, 5), []op{
			take(0, 3, ok(3, 3*time.Second), 3*time.Second),
			// Level 3000 drained to 2500 at 500 ms, minus 1000.
			refund(500*ms, 1, 2*time.Second),
			take(500*ms, 4, ok(0, 5500*ms), 6*time.Second),
			refund(500*ms, 6, 0),
			take(500*ms, 6, ok(0, 6*time.Second), 6500*ms),
		})
	})
}
