package relief_test

import (
	"context"
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
	ctx := context.Background()
	for _, lim := range []sluice.Limit{
		sluice.PerSecond(5).WithBurst(10),
		{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Second},
		{Algorithm: sluice.SlidingLog, Rate: 10, Period: time.Second},
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Second},
		{Algorithm: sluice.LeakyBucket, Rate: 5, Period: time.Second, Burst: 10},
	} {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			clock := clocktest.New()
			ref := newMem(t, clock)
			c := relief.NewOverLimitCache(newMem(t, clock), relief.CacheConfig{Clock: clock})
			cached := 0
			for step := range 400 {
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
					cached++
				}
			}
			if cached < 100 {
				t.Fatalf("only %d denials: the test did not exercise the cache", cached)
			}
		})
	}
}
