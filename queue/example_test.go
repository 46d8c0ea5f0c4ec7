package queue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/queue"
)

// stoppedClock is a sluice.Clock that always tells the same time, so that
// the examples' requests all arrive at once and their output never varies.
type stoppedClock struct{ t time.Time }

func (c stoppedClock) Now() time.Time { return c.t }

// The NGINX configuration
//
//	limit_req_zone $binary_remote_addr zone=one:10m rate=1r/s;
//	limit_req zone=one burst=5 delay=3;
//
// as a Queue. Reserve decides without waiting: of seven requests at once,
// the first four proceed, the next two wait their turn, and the seventh is
// turned away.
func Example() {
	store := memstore.New(memstore.Config{Clock: stoppedClock{time.Unix(1700000000, 0)}})
	defer store.Close()
	q, err := queue.New(store, queue.Config{Rate: 1, Period: time.Second, Burst: 5, Delay: 3})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 7; i++ {
		d, err := q.Reserve(ctx, "203.0.113.7")
		if err != nil {
			panic(err)
		}
		switch d.Status() {
		case queue.Rejected:
			fmt.Printf("request %d: %v, retry after %v\n", i, d.Status(), d.RetryAfter)
		default:
			fmt.Printf("request %d: %v, proceed after %v\n", i, d.Status(), d.Delay)
		}
	}
	// Output:
	// request 1: PASSED, proceed after 0s
	// request 2: PASSED, proceed after 0s
	// request 3: PASSED, proceed after 0s
	// request 4: PASSED, proceed after 0s
	// request 5: DELAYED, proceed after 1s
	// request 6: DELAYED, proceed after 2s
	// request 7: REJECTED, retry after 1s
}

// With nodelay nothing waits: Wait returns at once, and the burst only caps
// how many requests may run ahead of the rate. A rejection is ErrRejected,
// and the Decision tells the client when to come back.
func ExampleQueue_Wait() {
	store := memstore.New(memstore.Config{Clock: stoppedClock{time.Unix(1700000000, 0)}})
	defer store.Close()
	q, err := queue.New(store, queue.Config{Rate: 30, Period: time.Minute, Burst: 2, NoDelay: true})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		d, err := q.Wait(ctx, "user:42")
		switch {
		case errors.Is(err, queue.ErrRejected):
			fmt.Printf("request %d: rejected, Retry-After: %.0f\n", i, d.RetryAfter.Seconds())
		case err != nil:
			fmt.Printf("request %d: %v\n", i, err)
		default:
			fmt.Printf("request %d: served\n", i)
		}
	}
	// Output:
	// request 1: served
	// request 2: served
	// request 3: served
	// request 4: rejected, Retry-After: 2
}

// A request that will not run after all gives its place back with Cancel,
// here the last one admitted, so that the next request is admitted in its
// place rather than turned away.
func ExampleDecision_Cancel() {
	store := memstore.New(memstore.Config{Clock: stoppedClock{time.Unix(1700000000, 0)}})
	defer store.Close()
	q, err := queue.New(store, queue.Config{Rate: 1, Period: time.Second, Burst: 1})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	q.Reserve(ctx, "k")
	d, err := q.Reserve(ctx, "k")
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Status(), d.Delay)
	if err := d.Cancel(ctx); err != nil {
		panic(err)
	}
	d, err = q.Reserve(ctx, "k")
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Status(), d.Delay)
	// Output:
	// DELAYED 1s
	// DELAYED 1s
}
