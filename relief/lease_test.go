package relief_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/relief"
)

// takes records the cost of every decision a store is asked for.
type takes struct {
	sluice.Limiter
	mu    sync.Mutex
	costs []int
}

func (s *takes) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	s.mu.Lock()
	s.costs = append(s.costs, cost)
	s.mu.Unlock()
	return s.Limiter.AllowN(ctx, key, lim, cost)
}

// A lease is the units this server asked of a key in the last Hold, at
// most the lease's share of the limit, and none (the request's own cost)
// when that is under 2: a key asked for at a steady rate gets one lease of
// a Hold's units per Hold, a faster one the share of its limit, and a slow
// key or a small limit is decided one request at a time, exactly.
func TestBatcherLeaseIsAHoldsUseCappedAtItsShareOfTheLimit(t *testing.T) {
	const hold = 100 * time.Millisecond
	hourOf := func(n int) sluice.Limit {
		return sluice.Limit{Algorithm: sluice.FixedWindow, Rate: n, Period: time.Hour}
	}
	for _, tc := range []struct {
		name    string
		lim     sluice.Limit
		perHold int // requests per Hold, evenly spaced
		every   time.Duration
		// want is the size of every store decision in the last of 4 Holds
		// (lo to hi), and trips how many there are at most.
		lo, hi, trips int
	}{
		{"100 a Hold of 100,000 an hour", hourOf(100_000), 100, 0, 95, 101, 2},
		{"5,000 a Hold of 100,000 an hour: 1%", hourOf(100_000), 5000, 0, 1000, 1000, 5},
		{"a limit of 199: no lease", hourOf(199), 40, 0, 1, 1, 40},
		{"one every 150ms: no lease", hourOf(100_000), 0, 150 * time.Millisecond, 1, 1, 1},
		{"a bucket's burst is its capacity", sluice.PerHour(1_000_000).WithBurst(300), 100, 0, 3, 3, 34},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.At(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			store := &takes{Limiter: newMem(t, clock)}
			b := relief.NewBatcher(store, relief.BatchConfig{LeaseShare: 0.01, Hold: hold, Clock: clock})
			step := tc.every
			if step == 0 {
				step = hold / time.Duration(tc.perHold)
			}
			var last []int
			for h := range 4 {
				store.mu.Lock()
				store.costs = store.costs[:0]
				store.mu.Unlock()
				for at := time.Duration(0); at < hold; at += step {
					if r, err := b.AllowN(context.Background(), "k", tc.lim, 1); err != nil || !r.Allowed {
						t.Fatalf("Hold %d, +%v: AllowN = %+v, %v", h, at, r, err)
					}
					clock.Advance(step)
				}
				last = append([]int(nil), store.costs...)
			}
			if len(last) > tc.trips {
				t.Errorf("the last Hold took %d decisions of the store, want at most %d: %v", len(last), tc.trips, last)
			}
			for i, n := range last {
				if n < tc.lo || n > tc.hi {
					t.Errorf("the last Hold's decision %d of the store took %d units, want %d to %d (all: %v)", i, n, tc.lo, tc.hi, last)
					break
				}
			}
		})
	}
}

// A server never holds more than its share of a limit less one: requests
// that race for a lease pool what they take and give the rest back.
func TestBatcherLeaseHoldsAtMostItsShareLessOne(t *testing.T) {
	clock := clocktest.At(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := newMem(t, clock)
	b := relief.NewBatcher(store, relief.BatchConfig{LeaseShare: 0.1, Hold: time.Hour, Clock: clock})
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 200, Period: time.Hour}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for range 10 {
				if _, err := b.AllowN(context.Background(), "k", lim, 1); err != nil {
					panic(fmt.Sprint(g, err))
				}
			}
		})
	}
	wg.Wait()
	res, err := store.Peek(context.Background(), "k", lim)
	if err != nil {
		t.Fatal(err)
	}
	// 160 admitted; the store has charged them and what the server holds.
	if held := 200 - 160 - res.Remaining; held < 0 || held > 19 {
		t.Errorf("the server holds %d units, want at most 10%% of 200 less 1, 19", held)
	}
}

// gated is a store whose decisions wait at a gate, so that a test can
// have requests race while one is with the store.
type gated struct {
	takes
	gate chan struct{}
}

func (g *gated) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	<-g.gate
	return g.takes.AllowN(ctx, key, lim, cost)
}

// Requests that find no units while a lease is on its way wait for it
// rather than each asking the store: one round trip serves as many
// requests as its units cover.
func TestBatcherLeaseServesTheRequestsThatWaitForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gated{takes: takes{Limiter: newMem(t, nil)}, gate: make(chan struct{})}
		b := relief.NewBatcher(store, relief.BatchConfig{LeaseShare: 0.1, Hold: time.Hour})
		lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1000, Period: time.Hour}
		ctx := context.Background()
		// Warm: 15 requests take leases of 1, 2, 4 and 8 units and spend
		// them all; the key's use counts 15.
		for range 15 {
			go b.AllowN(ctx, "k", lim, 1)
			synctest.Wait()
			select {
			case store.gate <- struct{}{}: // it went to the store
				synctest.Wait()
			default:
			}
		}
		store.costs = nil
		admitted := make(chan bool, 8)
		for range 8 {
			go func() {
				r, err := b.AllowN(ctx, "k", lim, 1)
				admitted <- err == nil && r.Allowed
			}()
			synctest.Wait() // the first goes to the store, the others wait
		}
		store.gate <- struct{}{}
		synctest.Wait()
		close(store.gate) // whatever else asks the store
		for range 8 {
			if !<-admitted {
				t.Fatal("a request was not admitted")
			}
		}
		if got := store.costs; len(got) != 1 {
			t.Errorf("8 racing requests asked the store %d times (%v), want once: a lease serves those waiting", len(got), got)
		}
	})
}

// admitAll is a store that admits everything and allocates nothing.
type admitAll struct{ sluice.Limiter }

func (admitAll) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	return sluice.Result{Allowed: true, Remaining: lim.Capacity() - cost}, nil
}

// A key asked for once within a Hold gets no lease and costs no memory:
// on a long tail of keys each seen once, a Batcher with leases allocates
// nothing per decision (a pool is added for a key on its second request).
func TestBatcherLeaseAllocatesNothingForAKeyAskedForOnce(t *testing.T) {
	clock := clocktest.At(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := relief.NewBatcher(admitAll{}, relief.BatchConfig{LeaseShare: 0.01, Hold: 100 * time.Millisecond, Clock: clock})
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100_000, Period: time.Hour}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tail:%d", i)
	}
	i := 0
	allocs := testing.AllocsPerRun(len(keys)-1, func() {
		if _, err := b.AllowN(context.Background(), keys[i], lim, 1); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per decision on a key asked for once, want 0", allocs)
	}
}

// With a fleet's count (BatchConfig.Processes = Fleet.Fresh), a lease is
// at most ⌊f × C / n⌋ for the n this process last counted, on the bubble's
// clock: none before the first count; f × C alone; a quarter once it
// counts 4, and while announcing fails for less than the member TTL;
// none once it has failed for the TTL (the others no longer count this
// process), though Count keeps the last count for a local share; f × C
// again once it counts itself alone; none when a fleet of 60 makes the
// lease 1 unit.
func TestBatcherLeaseCapIsTheShareDividedByTheFleetsFreshCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hold = 100 * time.Millisecond
		const perHold = 200 // requests per Hold, more than any lease here
		// f × C = 0.001 × 100,000 = 100 units.
		lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100_000, Period: 24 * time.Hour}
		roster := newFakeRoster()
		me := newFleet(t, roster, "me")
		store := &takes{Limiter: newMem(t, nil)}
		b := relief.NewBatcher(store, relief.BatchConfig{LeaseShare: 0.001, Hold: hold, Processes: me.Fresh})
		ctx := context.Background()
		// largest sends two Holds of requests and returns the largest
		// decision the store was asked for in the second.
		largest := func(step string) int {
			t.Helper()
			for h := range 2 {
				store.mu.Lock()
				store.costs = store.costs[:0]
				store.mu.Unlock()
				for range perHold {
					if r, err := b.AllowN(ctx, "k", lim, 1); err != nil || !r.Allowed {
						t.Fatalf("%s, Hold %d: AllowN = %+v, %v", step, h, r, err)
					}
					time.Sleep(hold / perHold)
				}
			}
			return slices.Max(store.costs)
		}
		others := func(n int) {
			for i := range n {
				if _, err := roster.Announce(ctx, fmt.Sprint("other-", i), relief.DefaultFleetTTL, relief.DefaultFleetMax); err != nil {
					t.Fatal(err)
				}
			}
		}
		beat := func() {
			if err := me.Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// expect checks the largest decision at a step: want units, for
		// the reason why.
		expect := func(step string, want int, why string) {
			t.Helper()
			if got := largest(step); got != want {
				t.Errorf("%s: a decision of %d units, want %s", step, got, why)
			}
		}

		expect("not counted yet", 1, "1 (no lease)")
		beat()
		expect("counted alone", 100, "f × C = 100")
		others(3)
		beat()
		expect("counted 4", 25, "⌊100/4⌋ = 25")
		roster.setDown(true)
		if err := me.Beat(ctx); err == nil {
			t.Fatal("the roster is down, yet Beat answered")
		}
		expect("announcing failed for less than the TTL", 25, "⌊100/4⌋ = 25")
		time.Sleep(relief.DefaultFleetTTL)
		expect("announcing failed for the TTL", 1, "1 (the others no longer count this process)")
		if n := me.Count(); n != 4 {
			t.Errorf("Count = %d after the failures, want the last count, 4", n)
		}
		roster.setDown(false)
		beat() // the others' members have expired
		expect("counted alone again", 100, "f × C = 100")
		others(59)
		beat()
		expect("counted 60", 1, "1 (⌊100/60⌋ = 1: no lease)")
	})
}
