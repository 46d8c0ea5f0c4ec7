package relief_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/relief"
)

// The bounds each relief states (package doc, docs/serve.md) are checked
// here across processes: each "process" is its own Redis client with its
// own wrapper stack, as separate serve processes have, sharing one real
// Redis (and a 3-shard Cluster). Every limit is a day long, so nothing
// refills while a burst runs and the store alone would admit exactly the
// limit.

const (
	procs      = 4
	burstCalls = 600 // decisions per key and burst, spread over the processes
	perProc    = 8   // concurrent requests in each process
)

// dayOfEach is a limit of every algorithm, 100 a day.
var dayOfEach = dayOfEachAt(100)

// dayOfEachAt is a limit of every algorithm, capacity a day.
func dayOfEachAt(capacity int) []sluice.Limit {
	return []sluice.Limit{
		{Algorithm: sluice.TokenBucket, Rate: capacity, Period: 24 * time.Hour, Burst: capacity},
		{Algorithm: sluice.FixedWindow, Rate: capacity, Period: 24 * time.Hour},
		{Algorithm: sluice.SlidingLog, Rate: capacity, Period: 24 * time.Hour},
		{Algorithm: sluice.SlidingWindow, Rate: capacity, Period: 24 * time.Hour},
		{Algorithm: sluice.LeakyBucket, Rate: capacity, Period: 24 * time.Hour, Burst: capacity},
	}
}

// redisTargets are the stores the bounds are checked on: one Redis and, in
// a full run, a 3-shard Cluster (a few seconds to start).
func redisTargets(t *testing.T) map[string]string {
	t.Helper()
	urls := map[string]string{"redis": "redis://" + redistest.StartServer(t).Addr}
	if !testing.Short() {
		urls["cluster"] = "redis+cluster://" + strings.Join(redistest.StartCluster(t, 3, 0).Addrs, ",")
	}
	return urls
}

// newStores opens procs clients of url, each as a process would.
func newStores(t *testing.T, url string, cfg redisstore.Config) []*redisstore.Store {
	t.Helper()
	out := make([]*redisstore.Store, procs)
	for i := range out {
		cfg.URL = url
		s, err := redisstore.New(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// burst sends burstCalls decisions of cost 1 on key, spread evenly over
// the processes, perProc at a time in each, and returns how many were
// admitted. A decision that fails fails the test.
func burst(t *testing.T, fleet []sluice.Limiter, key string, lim sluice.Limit) int {
	return burstN(t, fleet, key, lim, burstCalls)
}

// burstN is burst of calls decisions.
func burstN(t *testing.T, fleet []sluice.Limiter, key string, lim sluice.Limit, calls int) int {
	t.Helper()
	var admitted, failed atomic.Int64
	var wg sync.WaitGroup
	for _, l := range fleet {
		var left atomic.Int64
		left.Store(int64(calls / len(fleet)))
		for range perProc {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					r, err := l.AllowN(context.Background(), key, lim, 1)
					if err != nil {
						failed.Add(1)
					} else if r.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d decisions failed", n)
	}
	return int(admitted.Load())
}

// uniqueKey is a key no earlier run has spent.
func uniqueKey(t *testing.T, lim sluice.Limit) string {
	return fmt.Sprintf("{%s}:%s:%d", t.Name(), lim.Algorithm, time.Now().UnixNano())
}

// batchers puts a Batcher of cfg in front of each process's store and
// returns them as a fleet, with release, which releases the units every
// Batcher holds and fails the test if one cannot.
func batchers[S sluice.Limiter](t *testing.T, stores []S, cfg relief.BatchConfig) (fleet []sluice.Limiter, release func()) {
	var bs []*relief.Batcher
	for _, s := range stores {
		b := relief.NewBatcher(s, cfg)
		bs = append(bs, b)
		fleet = append(fleet, b)
	}
	return fleet, releaseAll(t, bs)
}

// releaseAll returns a func that releases the units each of bs holds and
// fails the test if one cannot.
func releaseAll(t *testing.T, bs []*relief.Batcher) func() {
	return func() {
		for _, b := range bs {
			if _, err := b.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// holdThenRelease checks a fleet whose processes hold units charged and
// not spent. On a fresh fleet each time (newFleet): as many decisions as
// the limit admit lo to the limit; once the fleet has released its units,
// a fresh client (alone) is admitted exactly the rest of the limit; and a
// burst of calls decisions on a fresh key admits lo to hi. bound says
// where lo and hi come from, for the messages. It returns the three
// counts admitted, for the log.
func holdThenRelease(t *testing.T, newFleet func() ([]sluice.Limiter, func()), alone sluice.Limiter, lim sluice.Limit, lo, hi, calls int, bound string) (first, rest, got int) {
	t.Helper()
	// As many decisions as the limit: each process is left holding units
	// the others are then refused.
	fleet, release := newFleet()
	key := uniqueKey(t, lim)
	first = burstN(t, fleet, key, lim, lim.Capacity())
	if first < lo || first > lim.Capacity() {
		t.Errorf("%d decisions: admitted %d, want between %d and the limit %d (%s)",
			lim.Capacity(), first, lo, lim.Capacity(), bound)
	}
	release()
	rest = burstN(t, []sluice.Limiter{alone}, key, lim, lim.Capacity())
	if rest != lim.Capacity()-first {
		t.Errorf("after release, a fresh client admitted %d, want the rest of the limit %d (%d admitted)",
			rest, lim.Capacity()-first, first)
	}
	// A burst of calls decisions on a fresh key.
	fleet, release = newFleet()
	defer release()
	got = burstN(t, fleet, uniqueKey(t, lim), lim, calls)
	if got < lo || got > hi {
		t.Errorf("%d decisions: admitted %d, want between %d and %d (limit %d, %s)",
			calls, got, lo, hi, lim.Capacity(), bound)
	}
	return first, rest, got
}

// The over-limit cache never admits a request the store would refuse, nor
// refuses one it would admit (no refunds here): across 4 processes the
// fleet admits exactly the limit, while most refusals cost no round trip.
func TestOverLimitCacheAdmitsExactlyTheLimitAcross4Processes(t *testing.T) {
	for name, url := range redisTargets(t) {
		t.Run(name, func(t *testing.T) {
			stores := newStores(t, url, redisstore.Config{})
			var trips []*counting
			var fleet []sluice.Limiter
			for _, s := range stores {
				c := &counting{Limiter: s}
				trips = append(trips, c)
				fleet = append(fleet, relief.NewOverLimitCache(c, relief.CacheConfig{MaxHold: time.Second}))
			}
			for _, lim := range dayOfEach {
				t.Run(lim.Algorithm.String(), func(t *testing.T) {
					for _, c := range trips {
						c.calls.Store(0)
					}
					got := burst(t, fleet, uniqueKey(t, lim), lim)
					var calls int64
					for _, c := range trips {
						calls += c.calls.Load()
					}
					if got != lim.Capacity() {
						t.Errorf("admitted %d of %d, want exactly the limit %d", got, burstCalls, lim.Capacity())
					}
					// Each process's concurrent requests may all reach Redis
					// before the first refusal is cached.
					if max := int64(lim.Capacity() + procs*perProc); calls > max {
						t.Errorf("%d round trips for %d decisions, want at most %d: the cache answered too few", calls, burstCalls, max)
					}
					t.Logf("admitted %d, limit %d, round trips %d of %d decisions", got, lim.Capacity(), calls, burstCalls)
				})
			}
		})
	}
}

// Coalesced decisions are made in Redis one after the other, exactly as
// each alone: across 4 processes the fleet admits exactly the limit.
func TestCoalescedDecisionsAdmitExactlyTheLimitAcross4Processes(t *testing.T) {
	for name, url := range redisTargets(t) {
		t.Run(name, func(t *testing.T) {
			var fleet []sluice.Limiter
			for _, s := range newStores(t, url, redisstore.Config{CoalesceWait: 200 * time.Microsecond}) {
				fleet = append(fleet, s)
			}
			for _, lim := range dayOfEach {
				t.Run(lim.Algorithm.String(), func(t *testing.T) {
					if got := burst(t, fleet, uniqueKey(t, lim), lim); got != lim.Capacity() {
						t.Errorf("admitted %d of %d, want exactly the limit %d", got, burstCalls, lim.Capacity())
					}
				})
			}
		})
	}
}

// Reservations of B units: the fleet holds at most processes × (B−1)
// units charged and not spent, so it admits at least the limit less that;
// a fixed window never admits over its limit, the other algorithms at most
// processes × (B−1) over. Once every process has released its units, the
// store has counted exactly what was admitted: a fresh client is admitted
// exactly the rest of the limit.
func TestReservationsStayWithin4TimesBatchLess1OfTheLimitAcross4Processes(t *testing.T) {
	const batch = 10
	slack := procs * (batch - 1)
	for name, url := range redisTargets(t) {
		t.Run(name, func(t *testing.T) {
			stores := newStores(t, url, redisstore.Config{})
			// newFleet puts a Batcher in front of each process's store, with
			// a Hold longer than a burst: units stay held while it runs.
			newFleet := func() ([]sluice.Limiter, func()) {
				return batchers(t, stores, relief.BatchConfig{Batch: batch, Hold: time.Minute})
			}
			for _, lim := range dayOfEach {
				t.Run(lim.Algorithm.String(), func(t *testing.T) {
					lo, hi := admittedBounds(lim, lim.Capacity(), slack)
					// A burst far over the limit last.
					first, rest, got := holdThenRelease(t, newFleet, stores[0], lim, lo, hi, burstCalls,
						fmt.Sprintf("4 × (B−1) = %d held", slack))
					t.Logf("limit %d, bound [%d, %d]: %d admitted of the first %d, %d more after release; %d of a burst of %d",
						lim.Capacity(), lo, hi, first, lim.Capacity(), rest, got, burstCalls)
				})
			}
		})
	}
}

// Leases of at most 2% of a limit of 1,000 a day (L = 20 units): the fleet
// holds at most processes × (L−1) units charged and not spent, so it
// admits at least the limit less that; a fixed window never admits over
// its limit, the other algorithms at most processes × (L−1) over. Once
// every process has released its units, the store has counted exactly
// what was admitted. And the leases do their job: half the limit costs
// Redis a round trip per 5 decisions or fewer.
func TestLeasesStayWithin4TimesTheLeaseLess1OfTheLimitAcross4Processes(t *testing.T) {
	const share, capacity = 0.02, 1000
	lease := int(share * capacity)
	slack := procs * (lease - 1)
	dayOfEach := dayOfEachAt(capacity)
	for name, url := range redisTargets(t) {
		t.Run(name, func(t *testing.T) {
			stores := newStores(t, url, redisstore.Config{})
			var trips []*storeTrips
			for _, s := range stores {
				trips = append(trips, &storeTrips{Store: s})
			}
			// newFleet puts a leasing Batcher in front of each process's
			// store, with a Hold longer than a burst: units stay held
			// while it runs.
			newFleet := func() ([]sluice.Limiter, func()) {
				return batchers(t, trips, relief.BatchConfig{LeaseShare: share, Hold: time.Minute})
			}
			for _, lim := range dayOfEach {
				t.Run(lim.Algorithm.String(), func(t *testing.T) {
					lo, hi := admittedBounds(lim, capacity, slack)
					roundTrips, _ := halfInFewTrips(t, newFleet, trips, lim)
					// A burst of twice the limit last.
					first, rest, got := holdThenRelease(t, newFleet, stores[0], lim, lo, hi, 2*capacity,
						fmt.Sprintf("4 × (L−1) = %d held", slack))
					t.Logf("limit %d, bound [%d, %d]: %d round trips for %d decisions; %d admitted of %d, %d more after release; %d of a burst of %d",
						capacity, lo, hi, roundTrips, capacity/2, first, capacity, rest, got, 2*capacity)
				})
			}
		})
	}
}

// Leases that follow a fleet: the 4 processes announce themselves in a
// fleet on their store (relief.Fleet) and each leases at most
// ⌊f × C / 4⌋ of a limit of capacity C for the count of 4 it has seen
// (f = 8% of 1,000 a day: leases of at most 20, as the test above), so
// the fleet holds at most 4 × 19 = 76 units, under f × C = 80, in total:
// a fixed window admits at least C − f × C and never over, the other
// algorithms within f × C either way, where leases of f × C each would
// allow 4 × 79. Once every process has released its units, the store has
// counted exactly what was admitted; half the limit costs Redis a round
// trip per 5 decisions or fewer.
func TestFleetLeasesStayWithinFTimesTheLimitInTotalAcross4Processes(t *testing.T) {
	const share, capacity = 0.08, 1000
	const bound = int(share * capacity) // f × C, in total
	perProcess := int(share * capacity / procs)
	dayOfEach := dayOfEachAt(capacity)
	for name, url := range redisTargets(t) {
		t.Run(name, func(t *testing.T) {
			stores := newStores(t, url, redisstore.Config{})
			fleetName := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
			var trips []*storeTrips
			var fleets []*relief.Fleet
			for i, s := range stores {
				trips = append(trips, &storeTrips{Store: s})
				// Beat is called by the test; the TTL is the longest a
				// roster takes, so that a count stays fresh while a slow
				// test runs.
				f, err := relief.NewFleet(relief.FleetConfig{Roster: s.Roster(fleetName), ID: fmt.Sprint("p", i),
					Period: redisstore.MaxRosterTTL / 2, TTL: redisstore.MaxRosterTTL, Logger: quiet()})
				if err != nil {
					t.Fatal(err)
				}
				fleets = append(fleets, f)
			}
			// newFleet has every process count the fleet (twice: the
			// second round sees the first's joins), then puts a leasing
			// Batcher that follows the count in front of each process's
			// store, with a Hold longer than a burst.
			newFleet := func() (fleet []sluice.Limiter, release func()) {
				for range 2 {
					for _, f := range fleets {
						if err := f.Beat(context.Background()); err != nil {
							t.Fatal(err)
						}
					}
				}
				var bs []*relief.Batcher
				for i, c := range trips {
					if n := fleets[i].Fresh(); n != procs {
						t.Fatalf("process %d counts %d, want %d", i, n, procs)
					}
					b := relief.NewBatcher(c, relief.BatchConfig{LeaseShare: share, Hold: time.Minute, Processes: fleets[i].Fresh})
					bs = append(bs, b)
					fleet = append(fleet, b)
				}
				return fleet, releaseAll(t, bs)
			}
			for _, lim := range dayOfEach {
				t.Run(lim.Algorithm.String(), func(t *testing.T) {
					lo, hi := admittedBounds(lim, capacity, bound)
					// None of the round trips over ⌊f × C / 4⌋ units.
					roundTrips, most := halfInFewTrips(t, newFleet, trips, lim)
					if most > int64(perProcess) {
						t.Errorf("a lease of %d units, want at most ⌊f × C / 4⌋ = %d", most, perProcess)
					}
					// A burst of twice the limit last.
					first, rest, got := holdThenRelease(t, newFleet, stores[0], lim, lo, hi, 2*capacity,
						fmt.Sprintf("f × C = %d", bound))
					t.Logf("limit %d, bound [%d, %d]: %d round trips for %d decisions, leases of at most %d; %d admitted of %d, %d more after release; %d of a burst of %d",
						capacity, lo, hi, roundTrips, capacity/2, most, first, capacity, rest, got, 2*capacity)
				})
			}
		})
	}
}

// admittedBounds returns the least and the most that processes holding
// slack units between them in all may admit of a limit of capacity: the
// capacity less or plus slack, except that a fixed window never admits
// over its capacity.
func admittedBounds(lim sluice.Limit, capacity, slack int) (lo, hi int) {
	lo, hi = capacity-slack, capacity+slack
	if lim.Algorithm == sluice.FixedWindow {
		hi = capacity
	}
	return lo, hi
}

// halfInFewTrips checks that, on a fresh fleet (newFleet) over the
// stores of trips, half the limit is all admitted in a fifth as many
// round trips or fewer, and returns the round trips and the largest
// decision the stores were asked for.
func halfInFewTrips(t *testing.T, newFleet func() ([]sluice.Limiter, func()), trips []*storeTrips, lim sluice.Limit) (n, most int64) {
	t.Helper()
	half := lim.Capacity() / 2
	fleet, release := newFleet()
	defer release()
	for _, c := range trips {
		c.calls.Store(0)
		c.most.Store(0)
	}
	if got := burstN(t, fleet, uniqueKey(t, lim), lim, half); got != half {
		t.Errorf("%d decisions: admitted %d, want all", half, got)
	}
	for _, c := range trips {
		n += c.calls.Load()
		most = max(most, c.most.Load())
	}
	if n > int64(half/5) {
		t.Errorf("%d decisions took %d round trips, want at most %d: too few leases", half, n, half/5)
	}
	return n, most
}

// storeTrips counts the decisions a store is asked for, and the largest,
// and takes refunds.
type storeTrips struct {
	*redisstore.Store
	calls, most atomic.Int64
}

func (c *storeTrips) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	c.calls.Add(1)
	for m := c.most.Load(); int64(cost) > m && !c.most.CompareAndSwap(m, int64(cost)); m = c.most.Load() {
	}
	return c.Store.AllowN(ctx, key, lim, cost)
}
