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
			// J have joined since without the n counting them.
			window := func(step string, live []*member, n, j int) {
				t.Helper()
				for _, lim := range lims {
					L := lim.Capacity()
					var shares int
					var counts []int
					var onStore, alone []sluice.Limiter
					for _, m := range live {
						c := m.fleet.Count()
						counts = append(counts, c)
						shares += failsafe.Split(lim, c).Capacity()
						onStore, alone = append(onStore, m.onStore), append(alone, m.alone)
					}
					calls := 150 * len(live)
					gotStore := burstN(t, onStore, uniqueKey(t, lim), lim, calls)
					gotAlone := burstN(t, alone, uniqueKey(t, lim), lim, calls)
					bound := L + j*(L/(n+1))
					t.Logf("%s, %v: counts %v; on the store %d, alone %d (shares %d, bound %d) of L %d",
						step, lim.Algorithm, counts, gotStore, gotAlone, shares, bound, L)
					if want := min(L, shares); gotStore != want {
						t.Errorf("%s, %v: on the store the fleet admitted %d, want min(L, Σ shares) = %d", step, lim.Algorithm, gotStore, want)
					}
					if gotAlone != shares {
						t.Errorf("%s, %v: on the shares alone the fleet admitted %d, want Σ shares %d", step, lim.Algorithm, gotAlone, shares)
					}
					if gotAlone > bound {
						t.Errorf("%s, %v: on the shares alone the fleet admitted %d, over the bound L + J·⌊L/(n+1)⌋ = %d", step, lim.Algorithm, gotAlone, bound)
					}
					if j == 0 && len(live) == n && gotStore < L-n+1 {
						t.Errorf("%s, %v: a settled fleet of %d admitted %d, under L−n+1 = %d: starved", step, lim.Algorithm, n, gotStore, L-n+1)
					}
				}
			}
			first, joiners := all[:3], all[3:]
			for range 2 { // the second round counts the first's joins
				for _, m := range first {
					m.beat(t)
				}
			}
			window("3 processes", first, 3, 0)

			for _, m := range joiners {
				m.beat(t) // each counts itself and those before it
			}
			window("7 joined, not yet counted by the 3", all, 3, 7)

			for _, m := range all {
				m.beat(t)
			}
			window("10 processes", all, 10, 0)

			stopped, stop := context.WithCancel(context.Background())
			stop()
			for _, m := range joiners {
				m.fleet.Run(stopped) // as when serve stops: it leaves the roster
			}
			// The 3 left still count 10: they under-admit, 3·⌊L/10⌋,
			// until their next announce.
			window("7 left, not yet counted by the 3", first, 10, 0)

			for _, m := range first {
				m.beat(t)
			}
			window("3 processes again", first, 3, 0)
		})
	}
}
