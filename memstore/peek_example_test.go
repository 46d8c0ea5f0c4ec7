package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// A peek reads a key's state without spending it: after 2 hits on 7 per
// minute, 5 remain, however often one looks.
func ExampleStore_Peek() {
	clock := &manualClock{now: time.Unix(1700000000, 0)} // 20 s into a minute
	store := memstore.New(memstore.Config{Clock: clock})
	defer store.Close()
	ctx := context.Background()

	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 7, Period: time.Minute}
	store.Allow(ctx, "user:42", lim)
	store.Allow(ctx, "user:42", lim)
	clock.Advance(10 * time.Second)
	for range 2 {
		res, err := store.Peek(ctx, "user:42", lim)
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Allowed, res.Remaining, res.ResetAfter)
	}
	// Output:
	// true 5 30s
	// true 5 30s
}
