package adaptive_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// A limiter around calls to a backend: admit, do the work, report how it
// ended. Refused work is answered at once (503, UNAVAILABLE) rather than
// queued behind a backend that is already slow.
func Example() {
	lim, err := adaptive.New(adaptive.Config{
		// Hold the mean latency near 150ms: the latency objective.
		Algorithm: adaptive.AIMD{Timeout: 150 * time.Millisecond},
		Initial:   20, Min: 5, Max: 500,
	})
	if err != nil {
		panic(err)
	}
	call := func(ctx context.Context, p adaptive.Priority) error {
		tok, ok := lim.Acquire(ctx, p)
		if !ok {
			return fmt.Errorf("overloaded, retry in %v", max(lim.RetryAfter(), 50*time.Millisecond))
		}
		err := doWork(ctx)
		if err != nil {
			tok.Done(adaptive.Dropped) // a timeout: a sign of overload
			return err
		}
		tok.Done(adaptive.Success)
		return nil
	}
	fmt.Println(call(context.Background(), adaptive.Critical))
	s := lim.Stats()
	fmt.Println(s.Limit, s.InFlight, s.Admitted.Of(adaptive.Critical))
	// Output:
	// <nil>
	// 20 0 1
}

func doWork(context.Context) error { return nil }
