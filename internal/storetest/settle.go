package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// debtAlgorithms are the algorithms a sluice.Charger carries a debt for.
var debtAlgorithms = []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow, sluice.SlidingWindow}

// RunSettle checks reserve-then-settle on a limiter that is a
// sluice.Refunder and a sluice.Charger: 1,000 reservations on five keys,
// each of a random estimate settled with a random actual cost (below,
// equal to or above the estimate), leave each key's spent total, read by a
// peek, equal to the sum of its actual costs, for each algorithm that
// carries a debt. The clock stands still, so that nothing refills.
func RunSettle(t *testing.T, newStore NewStore) {
	for _, a := range debtAlgorithms {
		t.Run(a.String(), func(t *testing.T) {
			store := newStore(t, clocktest.New())
			lim := sluice.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Hour, Burst: 1_000_000}
			ctx, rng := context.Background(), rand.New(rand.NewPCG(18, uint64(a)))
			keys := [5]string{}
			var spent [5]int
			for i := range keys {
				keys[i] = keyOf(t) + "/" + string(rune('a'+i))
			}
			for range 1000 {
				k := rng.IntN(len(keys))
				estimate, actual := 1+rng.IntN(50), rng.IntN(101)
				r, err := sluice.Reserve(ctx, store, keys[k], lim, estimate)
				if err != nil || !r.Allowed {
					t.Fatalf("Reserve(%d) = %+v, %v", estimate, r.Result, err)
				}
				if _, err := r.Settle(ctx, actual); err != nil {
					t.Fatalf("Settle(%d): %v", actual, err)
				}
				spent[k] += actual
			}
			for i, key := range keys {
				got := peek(t, store, key, lim)
				if lim.Capacity()-got.Remaining != spent[i] {
					t.Errorf("key %d: spent %d by the store's count, want the sum of actual costs %d", i, lim.Capacity()-got.Remaining, spent[i])
				}
			}
		})
	}
}

// RunDebt checks that a charge past the limit leaves the key in debt and
// that its next request waits exactly what it owes: on a 10-unit limit, a
// reservation of 4 settled at 14 owes 4 units beyond empty. A token bucket
// of 10 per second then admits a request of cost 1 after exactly 500 ms (4
// units owed and its own, 100 ms each), a fixed window at its end; for
// each algorithm the request is refused one resolution before the
// RetryAfter it was given and admitted at it. An algorithm that cannot
// carry a debt is refused as bad input. res is the store's clock
// resolution (zero: a nanosecond).
func RunDebt(t *testing.T, newStore NewStore, res time.Duration) {
	res = max(res, 1)
	want := map[sluice.Algorithm]time.Duration{sluice.TokenBucket: 500 * time.Millisecond, sluice.FixedWindow: time.Second}
	for _, a := range sluice.Algorithms() {
		t.Run(a.String(), func(t *testing.T) {
			clock := clocktest.New()
			store := newStore(t, clock)
			lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Second, Burst: 10}
			ctx, key := context.Background(), keyOf(t)
			ch, ok := store.(sluice.Charger)
			if !ok {
				t.Fatalf("%T has no ChargeN: the settle suite needs a sluice.Charger", store)
			}
			if !carriesDebt(a) {
				if _, err := ch.ChargeN(ctx, key, lim, 1); !errors.Is(err, sluice.ErrInvalidLimit) {
					t.Errorf("ChargeN on %v: %v, want ErrInvalidLimit", a, err)
				}
				return
			}
			r, err := sluice.Reserve(ctx, store, key, lim, 4)
			if err != nil || !r.Allowed {
				t.Fatalf("Reserve(4) = %+v, %v", r.Result, err)
			}
			after, err := r.Settle(ctx, 14)
			if err != nil || after.Allowed || after.Remaining != 0 {
				t.Fatalf("Settle(14) = %+v, %v; want the key over its limit with nothing left", after, err)
			}
			first := allow(t, store, key, lim, 1)
			if first.Allowed {
				t.Fatalf("a key 4 units in debt admitted a request")
			}
			if w, ok := want[a]; ok && first.RetryAfter != w {
				t.Errorf("RetryAfter %v, want %v: what the debt and the request take to refill", first.RetryAfter, w)
			}
			clock.Advance(first.RetryAfter - res)
			if r := allow(t, store, key, lim, 1); r.Allowed || r.RetryAfter != res {
				t.Errorf("%v before the RetryAfter: %+v, want refused with RetryAfter %v", res, r, res)
			}
			clock.Advance(res)
			if r := allow(t, store, key, lim, 1); !r.Allowed {
				t.Errorf("at the RetryAfter %v the request is refused: %+v", first.RetryAfter, r)
			}
		})
	}
}

func carriesDebt(a sluice.Algorithm) bool {
	for _, d := range debtAlgorithms {
		if a == d {
			return true
		}
	}
	return false
}

// peek is Peek that fails the test on an error or a limiter without it.
func peek(t *testing.T, store sluice.Limiter, key string, lim sluice.Limit) sluice.Result {
	t.Helper()
	p, ok := store.(sluice.Peeker)
	if !ok {
		t.Fatalf("%T does not implement sluice.Peeker", store)
	}
	r, err := p.Peek(context.Background(), key, lim)
	if err != nil {
		t.Fatalf("Peek(%s): %v", key, err)
	}
	return r
}
