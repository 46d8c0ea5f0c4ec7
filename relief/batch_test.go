package relief_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/relief"
)

// Four servers with batches of 10 share one global limit of 100 per hour:
// together they never admit more than 100, the global store sees a small
// share of the requests, and unspent units go back after Hold.
func TestBatcher(t *testing.T) {
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
			if r, _ := s.Allow(ctx, "hot", lim); r.Allowed {
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
	if r, _ := b.Allow(ctx, "k", lim); !r.Allowed {
		t.Fatal("first request denied")
	}
	clock.Advance(60 * time.Millisecond) // the next window; the reservation is 60 ms old
	admitted := 0
	for range 30 {
		if r, _ := b.Allow(ctx, "k", lim); r.Allowed {
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
