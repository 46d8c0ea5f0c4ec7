package relief_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/relief"
)

// A denial answered from the cache is the denial the store would give: the
// same RetryAfter and the same ResetAfter (when the key is as good as new,
// which for a bucket is later than when the next request fits).
func TestOverLimitCacheDenialMatchesStore(t *testing.T) {
	for _, lim := range oneOfEach {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			cached := deniedAsTheStoreDenies(t, lim, 400)
			if cached < 100 {
				t.Fatalf("only %d denials: the test did not exercise the cache", cached)
			}
		})
	}
}

// denyAll denies every request for a second and keeps nothing.
type denyAll struct{}

func (denyAll) AllowN(_ context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := sluice.Check(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	return sluice.Result{RetryAfter: time.Second, ResetAfter: time.Second}, nil
}

// The cache's memory is bounded in bytes, not only in keys: denials of the
// longest keys take no more than MaxBytes, and a cached key is its own copy,
// never a caller's larger buffer kept alive.
func TestOverLimitCacheBoundedInBytes(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	const maxBytes = 256 << 10
	c := relief.NewOverLimitCache(denyAll{}, relief.CacheConfig{Clock: clock, MaxBytes: maxBytes})
	lim := sluice.PerSecond(1)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range 2000 { // 8 MB of keys, each denied and cached
		buf := []byte(strings.Repeat("x", 2*sluice.MaxKeyLen))
		key := string(buf)[:sluice.MaxKeyLen-8] + fmt.Sprintf("%08d", i)
		if r, err := c.Allow(ctx, key, lim); err != nil || r.Allowed {
			t.Fatalf("Allow = %+v, %v; want a denial", r, err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapAlloc) - int64(before.HeapAlloc); grew > 2*maxBytes {
		t.Errorf("caching 2000 denials of 4 KB keys grew the heap by %d bytes; want at most about MaxBytes (%d)", grew, maxBytes)
	}
	runtime.KeepAlive(c)
}

// A sliding window with CountRejected counts every request, admitted or
// not, so that a client that keeps sending stays refused: a denial answered
// from the cache would not be counted, and the client would be admitted
// again as soon as the window slid. The cache passes such a limit through,
// and every answer is the store's.
func TestOverLimitCacheCountsTheRequestsOfACountRejectedLimit(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Second, CountRejected: true}
	denied := deniedAsTheStoreDenies(t, lim, 3000) // 3 s of a request every millisecond
	if denied < 2900 {
		t.Fatalf("only %d of 3000 denied: the test did not keep the key over its limit", denied)
	}
}

// A refund made by another process (straight on the store) is seen by a
// cache with MaxHold at most MaxHold late, though the cached denial of a
// daily window would otherwise last until the window ends; until then
// the cache answers, with no round trip.
func TestOverLimitCacheSeesARefundElsewhereWithinMaxHold(t *testing.T) {
	ctx := context.Background()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: 24 * time.Hour}
	clock := clocktest.New()
	store := newMem(t, clock)
	c := relief.NewOverLimitCache(store, relief.CacheConfig{Clock: clock, MaxHold: time.Second})
	for range lim.Capacity() {
		if res, err := c.Allow(ctx, "k", lim); err != nil || !res.Allowed {
			t.Fatalf("within the limit: %+v, %v", res, err)
		}
	}
	if res, _ := c.Allow(ctx, "k", lim); res.Allowed {
		t.Fatal("over the limit: admitted")
	}
	if err := store.RefundN(ctx, "k", lim, 2); err != nil { // another process's refund
		t.Fatal(err)
	}
	clock.Advance(999 * time.Millisecond)
	if res, _ := c.Allow(ctx, "k", lim); res.Allowed || res.RetryAfter < time.Hour {
		t.Fatalf("within MaxHold: %+v, want the cached denial and its RetryAfter", res)
	}
	clock.Advance(time.Millisecond)
	if res, _ := c.Allow(ctx, "k", lim); !res.Allowed {
		t.Fatalf("after MaxHold: %+v, want the refunded unit admitted", res)
	}
}

// deniedAsTheStoreDenies sends n requests for lim, one a millisecond, to
// an over-limit cache and to a store of its own, fails the test at the
// first the two answer differently, and returns how many were denied.
func deniedAsTheStoreDenies(t *testing.T, lim sluice.Limit, n int) int {
	t.Helper()
	ctx := context.Background()
	clock := clocktest.New()
	ref := newMem(t, clock)
	c := relief.NewOverLimitCache(newMem(t, clock), relief.CacheConfig{Clock: clock})
	denied := 0
	for step := range n {
		clock.Advance(time.Millisecond)
		got, err := c.Allow(ctx, "k", lim)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ref.Allow(ctx, "k", lim)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("step %d: cache answered %+v, the store %+v", step, got, want)
		}
		if !got.Allowed {
			denied++
		}
	}
	return denied
}
