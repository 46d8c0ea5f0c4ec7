package relief_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/redisstore"
	"github.com/sluicehq/sluice/relief"
)

// member is one process of the membership test: its own Redis client, its
// own Fleet on that client's Roster, and two stacks that take their share
// of a limit from the Fleet's count, as serve's -local-share auto does:
// onStore, relief.Hybrid in front of Redis (the store answers); alone,
// failure mode local's memory store (the store fails: the share alone
// decides).
type member struct {
	fleet          *relief.Fleet
	onStore, alone sluice.Limiter
}

// down is a store that fails every decision.
type down struct{}

func (down) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return down{}.AllowN(ctx, key, lim, 1)
}

func (down) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	return sluice.Result{}, fmt.Errorf("%w: the store is down", sluice.ErrUnavailable)
}

func newMember(t *testing.T, url, fleetName, id string) *member {
	t.Helper()
	s := newStores(t, url, redisstore.Config{})[0]
	// Beat is called by the test, never Run: the test decides when each
	// process counts. The TTL is the longest a roster takes, so that no
	// member expires while a (slow) test runs.
	f, err := relief.NewFleet(relief.FleetConfig{Roster: s.Roster(fleetName), ID: id,
		Period: redisstore.MaxRosterTTL / 2, TTL: redisstore.MaxRosterTTL, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	share := func(l sluice.Limit) sluice.Limit { return failsafe.Split(l, f.Count()) }
	onStoreLocal, aloneLocal := memstore.New(memstore.Config{}), memstore.New(memstore.Config{})
	t.Cleanup(func() { onStoreLocal.Close(); aloneLocal.Close() })
	alone, err := failsafe.New(failsafe.Config{Primary: down{}, Mode: failsafe.Local, Local: aloneLocal, Share: share, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return &member{fleet: f, onStore: relief.NewHybrid(onStoreLocal, s, share), alone: alone}
}

func (m *member) beat(t *testing.T) {
	t.Helper()
	if err := m.fleet.Beat(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The membership test. Processes join and leave a fleet on one Redis (and
// a 3-shard Cluster), each taking its share of a limit L from the count it
// last saw, ⌊L/c⌋ (failsafe.Split). Each window (a fresh key of a limit of
// a day, so nothing refills) sends every live process more requests than
// any share. The bounds of docs/serve.md, "Shares that follow the fleet":
//
//   - with the store answering, the fleet admits at most L (the store
//     decides last), and exactly min(L, Σ⌊L/cᵢ⌋): once every process has
//     counted the fleet of n, n·⌊L/n⌋ ≥ L−n+1, so scaling neither starves
//     nor multiplies the limit;
//   - on the shares alone (failure mode local), exactly Σ⌊L/cᵢ⌋, which is
//     at most L + J·⌊L/(n+1)⌋ in a window where J processes have joined n
//     that have not counted them yet (each joiner counts itself and those
//     before it), and at most L once every process has counted.
//
// A fixed -local-share 3 scaled to 10 processes admits 10·⌊L/3⌋ = 330 of
// 100 on the shares alone; a fixed 10 scaled down to 3 admits 30.
func TestFleetSharesAdmitAtMostLOnTheStoreAndLPlusJTimesLOverNPlus1AloneAsProcessesComeAndGo(t *testing.T) {
	lims := []sluice.Limit{
		{Algorithm: sluice.SlidingLog, Rate: 100, Period: 24 * time.Hour},
		{Algorithm: sluice.TokenBucket, Rate: 100, Period: 24 * time.Hour, Burst: 100},
	}
	for name, url := range redisTargets(t) {
		t.Run(name, func(t *testing.T) {
			fleetName := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
			var all []*member
			for i := range 10 {
				all = append(all, newMember(t, url, fleetName, fmt.Sprintf("p%d", i)))
			}
			// window sends a burst through the live members' stacks and
			// checks the bounds; n processes have counted each other, and
			// J have joined since without the n counting them. With mid,
			// the burst is split: 20 requests per process, then mid (the
			// processes count again), then the rest.
			window := func(step string, live []*member, n, j int, mid func()) {
				t.Helper()
				var counts []int
				var onStore, alone []sluice.Limiter
				for _, m := range live {
					counts = append(counts, m.fleet.Count())
					onStore, alone = append(onStore, m.onStore), append(alone, m.alone)
				}
				type run struct {
					keyStore, keyAlone         string
					shares, gotStore, gotAlone int
				}
				runs := make([]run, len(lims))
				for i, lim := range lims {
					runs[i] = run{keyStore: uniqueKey(t, lim), keyAlone: uniqueKey(t, lim)}
					for _, c := range counts {
						runs[i].shares += failsafe.Split(lim, c).Capacity()
					}
				}
				send := func(perProcess int) {
					for i, lim := range lims {
						runs[i].gotStore += burstN(t, onStore, runs[i].keyStore, lim, perProcess*len(live))
						runs[i].gotAlone += burstN(t, alone, runs[i].keyAlone, lim, perProcess*len(live))
					}
				}
				if mid != nil {
					// A process keeps what it spent when its share changes:
					// it admits at most the largest share it used in the
					// window.
					send(20)
					mid()
				}
				send(150)
				for i, lim := range lims {
					L, r := lim.Capacity(), runs[i]
					bound := L + j*(L/(n+1))
					t.Logf("%s, %v: counts %v; on the store %d, alone %d (shares %d, bound %d) of L %d",
						step, lim.Algorithm, counts, r.gotStore, r.gotAlone, r.shares, bound, L)
					switch {
					case mid != nil:
						if r.gotStore > L || r.gotAlone > r.shares {
							t.Errorf("%s, %v: admitted %d on the store and %d alone; want at most L = %d and the shares at the start, %d", step, lim.Algorithm, r.gotStore, r.gotAlone, L, r.shares)
						}
					case r.gotStore != min(L, r.shares):
						t.Errorf("%s, %v: on the store the fleet admitted %d, want min(L, Σ shares) = %d", step, lim.Algorithm, r.gotStore, min(L, r.shares))
					case r.gotAlone != r.shares:
						t.Errorf("%s, %v: on the shares alone the fleet admitted %d, want Σ shares %d", step, lim.Algorithm, r.gotAlone, r.shares)
					}
					if r.gotAlone > bound {
						t.Errorf("%s, %v: on the shares alone the fleet admitted %d, over the bound L + J·⌊L/(n+1)⌋ = %d", step, lim.Algorithm, r.gotAlone, bound)
					}
					if j == 0 && len(live) == n && r.gotStore < L-n+1 {
						t.Errorf("%s, %v: a settled fleet of %d admitted %d, under L−n+1 = %d: starved", step, lim.Algorithm, n, r.gotStore, L-n+1)
					}
				}
			}
			first, joiners := all[:3], all[3:]
			for range 2 { // the second round counts the first's joins
				for _, m := range first {
					m.beat(t)
				}
			}
			window("3 processes", first, 3, 0, nil)

			for _, m := range joiners {
				m.beat(t) // each counts itself and those before it
			}
			window("7 joined, not yet counted by the 3", all, 3, 7, nil)
			window("7 joined, counted by all in the window", all, 3, 7, func() {
				for _, m := range all {
					m.beat(t)
				}
			})
			window("10 processes", all, 10, 0, nil)

			stopped, stop := context.WithCancel(context.Background())
			stop()
			for _, m := range joiners {
				m.fleet.Run(stopped) // as when serve stops: it leaves the roster
			}
			// The 3 left still count 10: they under-admit, 3·⌊L/10⌋,
			// until their next announce.
			window("7 left, not yet counted by the 3", first, 10, 0, nil)

			for _, m := range first {
				m.beat(t)
			}
			window("3 processes again", first, 3, 0, nil)
		})
	}
}

// The membership test of leases that follow the fleet. Processes join and
// leave a fleet on one Redis (and a 3-shard Cluster), each leasing at most
// ⌊f × C / c⌋ of a limit of capacity C for the count c it last saw (f = 8%
// of 1,000 a day: f × C = 80). Each window sends the live processes the
// limit (on a fresh key, which leaves each holding units), then twice the
// limit (on another). The bound of docs/serve.md: once every
// process has counted the fleet, the fleet holds under f × C units, so a
// fixed window admits at least C − f × C and the other algorithms within
// f × C either way; while n processes have not counted J that joined,
// f × C + J × ⌊f × C / (n+1)⌋ (each joiner counts itself and those
// before it). Processes that leave take no lease; those left behind lease
// less until they count again.
func TestFleetLeasesStayWithinFTimesTheLimitPlusJTimesFTimesTheLimitOverNPlus1AsProcessesComeAndGo(t *testing.T) {
	const share, capacity = 0.08, 1000
	const fc = int(share * capacity)
	lims := []sluice.Limit{
		{Algorithm: sluice.FixedWindow, Rate: capacity, Period: 24 * time.Hour},
		{Algorithm: sluice.TokenBucket, Rate: capacity, Period: 24 * time.Hour, Burst: capacity},
	}
	type leaser struct {
		fleet *relief.Fleet
		lim   sluice.Limiter
	}
	for name, url := range redisTargets(t) {
		t.Run(name, func(t *testing.T) {
			fleetName := fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
			var all []*leaser
			for i := range 8 {
				s := newStores(t, url, redisstore.Config{})[0]
				// Beat is called by the test, never Run, but to leave.
				f, err := relief.NewFleet(relief.FleetConfig{Roster: s.Roster(fleetName), ID: fmt.Sprint("p", i),
					Period: redisstore.MaxRosterTTL / 2, TTL: redisstore.MaxRosterTTL, Logger: quiet()})
				if err != nil {
					t.Fatal(err)
				}
				b := relief.NewBatcher(s, relief.BatchConfig{LeaseShare: share, Hold: time.Minute, Processes: f.Fresh})
				t.Cleanup(func() { b.Release(context.Background()) })
				all = append(all, &leaser{fleet: f, lim: b})
			}
			beat := func(ls []*leaser) {
				t.Helper()
				for _, l := range ls {
					if err := l.fleet.Beat(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
			}
			// window sends twice the limit through the live processes, n
			// of which have counted each other, J joined since unseen.
			window := func(step string, live []*leaser, n, j int) {
				t.Helper()
				var fleet []sluice.Limiter
				var counts []int
				for _, l := range live {
					fleet = append(fleet, l.lim)
					counts = append(counts, l.fleet.Fresh())
				}
				bound := fc + j*(fc/(n+1))
				for _, lim := range lims {
					lo, hi := admittedBounds(lim, capacity, bound)
					// As many decisions as the limit: each process is left
					// holding units the others are then refused.
					first := burstN(t, fleet, uniqueKey(t, lim), lim, capacity)
					// Twice the limit: units spent late may go over.
					got := burstN(t, fleet, uniqueKey(t, lim), lim, 2*capacity)
					t.Logf("%s, %v: counts %v; admitted %d of %d and %d of %d, bound [%d, %d]",
						step, lim.Algorithm, counts, first, capacity, got, 2*capacity, lo, hi)
					if first < lo || first > capacity {
						t.Errorf("%s, %v: %d decisions admitted %d, want between %d and the limit %d (f × C = %d, J = %d, n = %d)",
							step, lim.Algorithm, capacity, first, lo, capacity, fc, j, n)
					}
					if got < lo || got > hi {
						t.Errorf("%s, %v: %d decisions admitted %d, want between %d and %d (f × C = %d, J = %d, n = %d)",
							step, lim.Algorithm, 2*capacity, got, lo, hi, fc, j, n)
					}
				}
			}
			first, joiners := all[:4], all[4:]
			beat(first)
			beat(first) // the second round counts the first's joins
			window("4 processes", first, 4, 0)
			beat(joiners) // each counts itself and those before it: 5 to 8
			window("4 joined, not yet counted by the 4", all, 4, 4)
			beat(all)
			window("8 processes", all, 8, 0)
			stopped, stop := context.WithCancel(context.Background())
			stop()
			for _, l := range joiners {
				l.fleet.Run(stopped) // as when serve stops: it leaves the roster
			}
			window("4 left, not yet counted by the 4", first, 8, 0)
			beat(first)
			window("4 processes again", first, 4, 0)
		})
	}
}
