package pgstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/pgstore"
)

// A quota of 10,000 calls per 30 days per tenant, counted in PostgreSQL.
// Open applies the schema's migrations; the decision is one statement.
func Example() {
	ctx := context.Background()
	store, err := pgstore.Open(ctx, "postgres://sluice@db.internal:5432/sluice?pool_max_conns=16", pgstore.Config{})
	if err != nil {
		panic(err) // the database was unreachable, or a migration failed
	}
	defer store.Close()

	quota := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10_000, Period: 30 * 24 * time.Hour}
	res, err := store.AllowN(ctx, "tenant:acme", quota, 1)
	if err != nil {
		panic(err) // bad input, or the database failed: wrap the store in failsafe to choose
	}
	fmt.Println(res.Allowed, res.Remaining, res.ResetAfter)

	// A period the caller computes, such as a calendar month.
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	count, admitted, err := store.Spend(ctx, "tenant:acme", start, start.AddDate(0, 1, 0), 10_000, 1)
	fmt.Println(count, admitted, err)
}
