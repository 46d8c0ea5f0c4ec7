package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkSettle measures reserve-then-settle on one held key against a
// plain AllowN: the settle's overhead per request is the difference, a
// second store call (a refund or a charge) and nothing on the heap.
func BenchmarkSettle(b *testing.B) {
	lim := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}
	ctx := context.Background()
	for _, bc := range []struct {
		name   string
		actual int // the estimate is 10
	}{{"allow-only", -1}, {"settle-refund", 3}, {"settle-charge", 25}, {"settle-equal", 10}} {
		b.Run(bc.name, func(b *testing.B) {
			clock := clocktest.New() // a second per request: the key never runs dry
			st := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
			defer st.Close()
			b.ReportAllocs()
			for b.Loop() {
				clock.Advance(time.Second)
				if bc.actual < 0 {
					st.AllowN(ctx, "key", lim, 10)
					continue
				}
				r, _ := sluice.Reserve(ctx, st, "key", lim, 10)
				r.Settle(ctx, bc.actual)
			}
		})
	}
}
