package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/redisstore"
)

func Example() {
	ctx := context.Background()
	store, err := redisstore.New(ctx, redisstore.Config{URL: "redis+cluster://redis-a:7000,redis-b:7000,redis-c:7000"})
	if err != nil {
		fmt.Println(err) // names the address it could not reach
		return
	}
	defer store.Close()

	res, err := store.AllowN(ctx, "user:42", sluice.PerSecond(5).WithBurst(10), 1)
	if err != nil {
		// Redis failed (see package failsafe for what to do then) or bad input.
		return
	}
	fmt.Println(res.Allowed, res.Remaining)
}

func ExampleStore_Acquire() {
	ctx := context.Background()
	store, err := redisstore.New(ctx, redisstore.Config{URL: "redis://localhost:6379"})
	if err != nil {
		return
	}
	defer store.Close()

	// At most 10 exports running at once across the fleet; a crashed
	// worker's slot comes back after a minute.
	lease, ok, retryAfter, err := store.Acquire(ctx, "exports", 10, time.Minute)
	if err != nil || !ok {
		fmt.Println("busy; retry after", retryAfter)
		return
	}
	defer store.Release(ctx, lease)
	// ... run the export, calling store.Renew(ctx, lease) if it runs long.
}

func ExampleParseURL() {
	opt, err := redisstore.ParseURL("redis+sentinel://:secret@sentinel-a:26379,sentinel-b:26379/mymaster?db=2")
	if err != nil {
		panic(err)
	}
	fmt.Println(opt.InitAddress, opt.Sentinel.MasterSet, opt.SelectDB)
	// Output: [sentinel-a:26379 sentinel-b:26379] mymaster 2
}

// ValidateLimit checks a configuration's limits before Redis is reached: a
// limit it refuses would fail on every call.
func ExampleValidateLimit() {
	for _, lim := range []sluice.Limit{
		{Algorithm: sluice.SlidingWindow, Rate: 100_000, Period: 24 * time.Hour},
		{Algorithm: sluice.TokenBucket, Rate: 2_000_000, Period: time.Second, Burst: 2_000_000},
		{Algorithm: sluice.FixedWindow, Rate: 1, Period: 1500 * time.Nanosecond},
	} {
		fmt.Println(lim, "->", redisstore.ValidateLimit(lim))
	}
	// Output:
	// sliding_window 100000/24h0m0s -> <nil>
	// token_bucket 2000000/1s burst 2000000 -> <nil>
	// fixed_window 1/1.5µs -> sluice: invalid limit: redisstore keeps time in microseconds; period 1.5µs is not a whole number of them
}
