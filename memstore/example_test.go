package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// manualClock is a sluice.Clock that moves only when told to.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time          { return c.now }
func (c *manualClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func Example() {
	// A clock that stands still, so the output is the same on every run;
	// leave Config.Clock nil in production.
	store := memstore.New(memstore.Config{Clock: &manualClock{now: time.Unix(1700000000, 0)}})
	defer store.Close()

	lim := sluice.PerSecond(5).WithBurst(10)
	for i := 1; i <= 11; i++ {
		res, err := store.Allow(context.Background(), "user:42", lim)
		if err != nil {
			panic(err) // bad input only: a denial is not an error
		}
		if !res.Allowed {
			fmt.Printf("request %d denied; retry after %v\n", i, res.RetryAfter)
		}
	}
	// Output:
	// request 11 denied; retry after 200ms
}

// A fake clock makes the store's decisions reproducible.
func Example_clock() {
	clock := &manualClock{now: time.Unix(1700000000, 0)}
	store := memstore.New(memstore.Config{Clock: clock})
	defer store.Close()

	// At most 3 in any second, exactly.
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 3, Period: time.Second}
	for _, step := range []time.Duration{0, 100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond, 700 * time.Millisecond} {
		clock.Advance(step)
		res, err := store.Allow(context.Background(), "k", lim)
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", res.Allowed, res.Remaining, res.RetryAfter)
	}
	// Output:
	// allowed=true remaining=2 retry-after=0s
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=700ms
	// allowed=true remaining=0 retry-after=0s
}

// A byte budget bounds memory whatever the keys' size: a flood of 4 KB keys
// evicts rather than grows. Stats feeds metrics.
func ExampleStore_Stats() {
	store := memstore.New(memstore.Config{MaxBytes: 1 << 20, Shards: 1, SweepInterval: -1})
	defer store.Close()

	lim := sluice.PerMinute(10)
	for i := range 1000 {
		key := fmt.Sprintf("%04096d", i) // 4 KB keys, 4 MB in all
		if _, err := store.Allow(context.Background(), key, lim); err != nil {
			panic(err)
		}
	}
	st := store.Stats()
	fmt.Println("within budget:", st.Bytes <= st.MaxBytes)
	fmt.Println("evicted:", st.Evictions == uint64(1000-st.Keys))
	// Output:
	// within budget: true
	// evicted: true
}
