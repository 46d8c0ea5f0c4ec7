package relief_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/relief"
)

// BenchmarkCachedDenial is a denial answered from an OverLimitCache, with no
// call to the inner limiter.
func BenchmarkCachedDenial(b *testing.B) {
	ctx := context.Background()
	clock := clocktest.New()
	c := relief.NewOverLimitCache(newMem(b, clock), relief.CacheConfig{Clock: clock})
	lim := sluice.PerHour(1)
	c.Allow(ctx, "k", lim)
	if r, err := c.Allow(ctx, "k", lim); err != nil {
		b.Fatal(err)
	} else if r.Allowed {
		b.Fatal("second request admitted")
	}
	b.ReportAllocs()
	for b.Loop() {
		if r, err := c.Allow(ctx, "k", lim); err != nil || r.Allowed {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkBatchedAdmission is an admission spent from a Batcher's
// reservation, with no call to the inner limiter but one in a million.
func BenchmarkBatchedAdmission(b *testing.B) {
	ctx := context.Background()
	clock := clocktest.New()
	bt := relief.NewBatcher(newMem(b, clock), relief.BatchConfig{Batch: 1_000_000, Hold: time.Hour, Clock: clock})
	lim := sluice.PerHour(1 << 40)
	b.ReportAllocs()
	for b.Loop() {
		if r, err := bt.Allow(ctx, "k", lim); err != nil || !r.Allowed {
			b.Fatal(r, err)
		}
	}
}
