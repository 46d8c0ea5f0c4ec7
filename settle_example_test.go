package sluice_test

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// A request admitted on an estimate of 500 tokens turns out to cost 1,300:
// settling charges the 800 more, leaving the tenant 300 tokens in debt on a
// bucket of 1,000 per minute, so that its next request waits for the debt
// and its own token to refill.
func ExampleReserve() {
	store := memstore.New(memstore.Config{Clock: clocktest.New()})
	defer store.Close()
	ctx, lim := context.Background(), sluice.PerMinute(1000)

	r, err := sluice.Reserve(ctx, store, "tenant:7", lim, 500)
	if err != nil || !r.Allowed {
		return
	}
	after, err := r.Settle(ctx, 1300)
	fmt.Println("in debt:", !after.Allowed, "for", after.RetryAfter, err)

	next, _ := store.AllowN(ctx, "tenant:7", lim, 1)
	fmt.Println("next request admitted:", next.Allowed, "retry after", next.RetryAfter)
	// Output:
	// in debt: true for 18s <nil>
	// next request admitted: false retry after 18.06s
}
