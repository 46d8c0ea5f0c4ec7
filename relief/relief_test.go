package relief_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/relief"
)

// newMem returns an in-memory store on clock, closed when the test ends.
func newMem(t testing.TB, clock sluice.Clock) *memstore.Store {
	t.Helper()
	s := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return s
}

// oneOfEach is a limit of every algorithm, about 10 requests a second.
var oneOfEach = []sluice.Limit{
	sluice.PerSecond(5).WithBurst(10),
	{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Second},
	{Algorithm: sluice.SlidingLog, Rate: 10, Period: time.Second},
	{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Second},
	{Algorithm: sluice.LeakyBucket, Rate: 5, Period: time.Second, Burst: 10},
}

// counting wraps a limiter and counts the calls that reach it: the round
// trips a remote store would make.
type counting struct {
	sluice.Limiter
	calls atomic.Int64
}

func (c *counting) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	c.calls.Add(1)
	return c.Limiter.AllowN(ctx, key, lim, cost)
}

// A client that ignores denials and keeps sending reaches the store once per
// RetryAfter, and every answer is the one the store would have given.
func TestOverLimitCacheAsksStoreOncePerRetryAfter(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	ref := newMem(t, clock) // the same limit, uncached
	inner := &counting{Limiter: newMem(t, clock)}
	c := relief.NewOverLimitCache(inner, relief.CacheConfig{Clock: clock})
	for _, lim := range oneOfEach {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			inner.calls.Store(0)
			key := "ignores-429:" + lim.Algorithm.String()
			requests := 0
			for step := range 3000 { // 3 s of a request every millisecond
				clock.Advance(time.Millisecond)
				got, err := c.Allow(ctx, key, lim)
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Allow(ctx, key, lim)
				if err != nil {
					t.Fatal(err)
				}
				if got.Allowed != want.Allowed {
					t.Fatalf("step %d: cached Allowed=%v, store says %v", step, got.Allowed, want.Allowed)
				}
				if !got.Allowed && got.RetryAfter > want.RetryAfter {
					t.Fatalf("step %d: cached RetryAfter %v later than the store's %v", step, got.RetryAfter, want.RetryAfter)
				}
				requests++
			}
			if calls := inner.calls.Load(); calls*5 > int64(requests) {
				t.Errorf("%d of %d requests reached the store; the cache should spare most", calls, requests)
			}
		})
	}
}

func TestHybrid(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	local, global := newMem(t, clock), newMem(t, clock)
	g := &counting{Limiter: global}
	half := func(l sluice.Limit) sluice.Limit { l.Rate, l.Burst = l.Rate/2, l.Burst/2; return l }
	h := relief.NewHybrid(local, g, half)
	lim := sluice.PerMinute(10)
	admitted := storetest.CountAllowed(t, 20, func() (sluice.Result, error) { return h.Allow(ctx, "k", lim) })
	if admitted != 5 || g.calls.Load() != 5 {
		t.Fatalf("admitted %d with %d global calls; want 5 and 5 (the local half stops the rest)", admitted, g.calls.Load())
	}
	// The global limit is spent elsewhere: a local admission is refunded.
	if _, err := global.AllowN(ctx, "k2", lim, 10); err != nil {
		t.Fatal(err)
	}
	if r, err := h.Allow(ctx, "k2", lim); err != nil {
		t.Fatal(err)
	} else if r.Allowed {
		t.Fatal("admitted past the global limit")
	}
	for range 5 {
		if _, err := local.Allow(ctx, "k2", half(lim)); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := local.Allow(ctx, "k2", half(lim)); err != nil {
		t.Fatal(err)
	} else if r.Allowed {
		t.Fatal("the local share was not refunded after the global denial: 6 local admissions")
	}
}
