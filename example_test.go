package sluice_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

func ExampleLimit() {
	// 100 requests per minute, in a sliding window.
	lim := sluice.PerMinute(100).WithAlgorithm(sluice.SlidingWindow)
	fmt.Println(lim)
	fmt.Println("capacity:", lim.Capacity())

	// 5 per second with bursts of 10, as a token bucket.
	fmt.Println(sluice.PerSecond(5).WithBurst(10))

	// NGINX's "rate=1r/s burst=5" is a leaky bucket admitting 6 back to back.
	fmt.Println(sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: 1, Period: time.Second, Burst: 6})
	// Output:
	// sliding_window 100/1m0s
	// capacity: 100
	// token_bucket 5/1s burst 10
	// leaky_bucket 1/1s burst 6
}

func ExampleLimit_Validate() {
	err := sluice.Limit{Rate: 0, Period: time.Second, Burst: 1}.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, sluice.ErrInvalidLimit))
	// Output:
	// sluice: invalid limit: rate 0 must be at least 1
	// true
}

func ExampleCheck() {
	// A cost that can never fit is an error, never a silent denial.
	err := sluice.Check("user:42", sluice.PerSecond(5).WithBurst(10), 11)
	fmt.Println(err)
	fmt.Println(errors.Is(err, sluice.ErrCostExceedsCapacity))
	// Output:
	// sluice: cost exceeds capacity: cost 11 exceeds the capacity 10 of token_bucket 5/1s burst 10
	// true
}

func ExampleParseAlgorithm() {
	for _, name := range []string{"sliding_window", "gcra", "leaky-bucket", "fifo"} {
		a, err := sluice.ParseAlgorithm(name)
		fmt.Println(a, err)
	}
	// Output:
	// sliding_window <nil>
	// token_bucket <nil>
	// leaky_bucket <nil>
	// token_bucket sluice: invalid limit: unknown algorithm "fifo" (want one of token_bucket, fixed_window, sliding_window, sliding_log, leaky_bucket)
}
