package algorithm_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// A state is a plain value: its zero value is a fresh key, and the caller
// passes the time (Unix nanoseconds) and the limit with every decision, so
// a store only has to keep the value per key and serialize access to it.
func ExampleTokenBucket() {
	lim := sluice.PerSecond(2).WithBurst(3) // 2 per second, bursts of 3
	var key algorithm.TokenBucket
	now := time.Unix(1700000000, 0).UnixNano()
	for i := range 4 {
		r := key.Take(now, lim, 1)
		fmt.Printf("request %d: allowed=%v remaining=%d retry-after=%v\n", i+1, r.Allowed, r.Remaining, r.RetryAfter)
	}
	// Half a second later one token has come back.
	now += int64(500 * time.Millisecond)
	r := key.Take(now, lim, 1)
	fmt.Printf("0.5s later: allowed=%v remaining=%d\n", r.Allowed, r.Remaining)
	// Output:
	// request 1: allowed=true remaining=2 retry-after=0s
	// request 2: allowed=true remaining=1 retry-after=0s
	// request 3: allowed=true remaining=0 retry-after=0s
	// request 4: allowed=false remaining=0 retry-after=500ms
	// 0.5s later: allowed=true remaining=0
}

// Peek reads a key's state without spending, as a check-only request does.
func ExampleFixedWindow_Peek() {
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 7, Period: time.Minute}
	var key algorithm.FixedWindow
	start := time.Unix(1700000000, 0).UnixNano() // 20 s into a minute
	key.Take(start, lim, 1)
	key.Take(start, lim, 1)
	r := key.Peek(start+int64(10*time.Second), lim)
	fmt.Printf("allowed=%v remaining=%d reset-after=%v\n", r.Allowed, r.Remaining, r.ResetAfter)
	// Output:
	// allowed=true remaining=5 reset-after=30s
}
