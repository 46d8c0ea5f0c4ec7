package relief_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// Four servers with batches of 10 share one global limit of 100 per hour:
// together they never admit more than 100, the global store sees a small
// share of the requests, and unspent units go back after Hold.
func TestBatchersShareOneGlobalLimit(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	g := &counting{Limiter: newMem(t, clock)}
	lim := sluice.PerHour(100)
	// Each server: an over-limit cache in front of a batcher, so that
	// neither admissions nor denials cost a round trip each.
	servers := make([]*relief.OverLimitCache, 4)
	for i := range servers {
		servers[i] = relief.NewOverLimitCache(relief.NewBatcher(g, relief.BatchConfig{Batch: 10, Hold: time.Second, Clock: clock}), relief.CacheConfig{Clock: clock})
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			for range 10 {
				r, err := servers[i%4].Allow(ctx, "hot", lim)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if a := admitted.Load(); a > 100 {
		t.Fatalf("admitted %d, more than the limit of 100", a)
	} else if a < 100-4*9 {
		t.Fatalf("admitted %d: more than servers×(batch−1) = 36 units held back", a)
	}
	// Unspent units come back after Hold, when the next request arrives.
	clock.Advance(2 * time.Second)
	total := admitted.Load()
	for _, s := range servers {
		for range 20 {
			if r, err := s.Allow(ctx, "hot", lim); err != nil {
				t.Fatal(err)
			} else if r.Allowed {
				total++
			}
		}
	}
	if total > 100 {
		t.Fatalf("admitted %d in all, more than 100", total)
	}
	if total < 99 {
		t.Fatalf("after Hold, %d admitted in all: units held by servers did not come back", total)
	}
	t.Logf("%d global calls for %d requests", g.calls.Load(), 64*10+4*20)
	if calls := g.calls.Load(); calls > 80 {
		t.Errorf("%d global calls for 720 requests: batching and caching spared too few", calls)
	}
}

// A fixed window's reserved units are never spent in the next window: no
// over-admission across the boundary.
func TestBatcherFixedWindowBoundary(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.At(time.Unix(1700000040, 0)) // a second boundary
	b := relief.NewBatcher(newMem(t, clock), relief.BatchConfig{Batch: 10, Hold: 100 * time.Millisecond, Clock: clock})
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Second}
	clock.Advance(950 * time.Millisecond)
	if r, err := b.Allow(ctx, "k", lim); err != nil {
		t.Fatal(err)
	} else if !r.Allowed {
		t.Fatal("first request denied")
	}
	clock.Advance(60 * time.Millisecond) // the next window; the reservation is 60 ms old
	admitted := 0
	for range 30 {
		if r, err := b.Allow(ctx, "k", lim); err != nil {
			t.Fatal(err)
		} else if r.Allowed {
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("the next window admitted %d, want exactly its 10", admitted)
	}
}

// An admission spent from a reservation reports when the key is as good as
// new in the store, which was charged for the whole batch, not zero.
func TestBatcherLocalAdmissionReportsReset(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	lim := sluice.PerSecond(5).WithBurst(10)
	b := relief.NewBatcher(newMem(t, clock), relief.BatchConfig{Batch: 10, Hold: time.Second, Clock: clock})
	ref := newMem(t, clock) // charged as the batch charges the store
	first, err := b.Allow(ctx, "k", lim)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.AllowN(ctx, "k", lim, 10)
	if err != nil {
		t.Fatal(err)
	}
	if first.ResetAfter != want.ResetAfter {
		t.Fatalf("reserving admission: ResetAfter %v, the store says %v", first.ResetAfter, want.ResetAfter)
	}
	clock.Advance(100 * time.Millisecond)
	got, err := b.Allow(ctx, "k", lim)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Allowed || got.ResetAfter != want.ResetAfter-100*time.Millisecond {
		t.Fatalf("local admission 100ms later = %+v, want allowed with ResetAfter %v", got, want.ResetAfter-100*time.Millisecond)
	}
}

// barrier holds the first n calls to the inner limiter until all n have
// arrived, so that n reservations race.
type barrier struct {
	*memstore.Store // RefundN as is
	wg              sync.WaitGroup
}

func (b *barrier) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	b.wg.Done()
	b.wg.Wait()
	return b.Store.AllowN(ctx, key, lim, cost)
}

// Two reservations that race for one key leave at most Batch−1 units held
// on this server, as documented; the rest go back to the store at once.
func TestBatcherRacingReservationsHoldAtMostBatchMinusOne(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	store := newMem(t, clock)
	inner := &barrier{Store: store}
	inner.wg.Add(2)
	b := relief.NewBatcher(inner, relief.BatchConfig{Batch: 10, Hold: time.Minute, Clock: clock})
	lim := sluice.PerHour(100)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if r, err := b.Allow(ctx, "k", lim); err != nil || !r.Allowed {
				t.Errorf("Allow = %+v, %v; want admitted", r, err)
			}
		})
	}
	wg.Wait()
	// Spent 2, held at most 9: the store has at least 89 left.
	r, err := store.Allow(ctx, "k", lim)
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining+1 < 100-2-9 {
		t.Errorf("the store has %d units left after two racing reservations; want at least %d (at most Batch-1 held)", r.Remaining+1, 100-2-9)
	}
}

// slowFirst lets its first call reach the store, then holds its answer
// until the second call has been answered: a reservation still on its way
// back while another request of the same server asks the store.
type slowFirst struct {
	*memstore.Store
	calls      atomic.Int64
	secondDone chan struct{}
}

func (s *slowFirst) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	n := s.calls.Add(1)
	r, err := s.Store.AllowN(ctx, key, lim, cost)
	switch n {
	case 1:
		<-s.secondDone
	case 2:
		close(s.secondDone)
	}
	return r, err
}

// A request is not denied for want of units its own server is reserving at
// that moment: it waits for them and spends from the reservation.
func TestBatcherWaitsForUnitsInFlight(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	inner := &slowFirst{Store: newMem(t, clock), secondDone: make(chan struct{})}
	b := relief.NewBatcher(inner, relief.BatchConfig{Batch: 10, Hold: time.Minute, Clock: clock})
	lim := sluice.PerHour(10) // the first reservation takes it all
	first := make(chan sluice.Result, 1)
	go func() {
		r, err := b.Allow(ctx, "k", lim)
		if err != nil {
			t.Error(err)
		}
		first <- r
	}()
	for inner.calls.Load() == 0 {
		runtime.Gosched() // until the first reservation has reached the store
	}
	second, err := b.Allow(ctx, "k", lim)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-first; !r.Allowed {
		t.Fatalf("first request: %+v, want admitted", r)
	}
	if !second.Allowed {
		t.Fatalf("second request denied (%+v) while its server was reserving 10 units", second)
	}
}
