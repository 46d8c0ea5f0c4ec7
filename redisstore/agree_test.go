package redisstore_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

var agreeKey atomic.Int64

// TestSlidingLogAgreesWithMemstore plays random sequences of requests and
// refunds, with costs up to the rate and rates up to sluice.MaxLogRate, on
// the Redis store and on the memory store at the same instants, and checks
// that every Result is the same: the script keeps the log as
// algorithm.SlidingLog does. Periods are whole multiples of LogEntries
// microseconds, where the two stores' slots agree. Instants are whole
// seconds: a key's time to live runs on Redis's clock, not the test's, so
// every time to live the script sets must outlast the real time between two
// calls.
func TestSlidingLogAgreesWithMemstore(t *testing.T) {
	clock := clocktest.New()
	rs := open(t, singleURL(t), clock)
	ms := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { ms.Close() })
	ctx := context.Background()
	rapid.Check(t, func(t *rapid.T) {
		lim := sluice.Limit{
			Algorithm: sluice.SlidingLog,
			Rate:      rapid.OneOf(rapid.IntRange(1, 100), rapid.IntRange(1, sluice.MaxLogRate)).Draw(t, "rate"),
			Period:    time.Duration(rapid.Int64Range(1, 1000).Draw(t, "period-slots")) * algorithm.LogEntries * time.Second,
		}
		key := "agree:" + strconv.FormatInt(agreeKey.Add(1), 10)
		clock.Set(clocktest.Epoch.Add(time.Duration(rapid.Int64Range(0, 1e6).Draw(t, "start")) * time.Second))
		p := int64(lim.Period / time.Second)
		for i := range rapid.IntRange(1, 40).Draw(t, "steps") {
			gap := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, p/int64(lim.Rate)*2+1), rapid.Int64Range(0, 2*p)).Draw(t, "gap")
			clock.Advance(time.Duration(gap) * time.Second)
			cost := rapid.OneOf(rapid.Just(1), rapid.IntRange(1, lim.Rate)).Draw(t, "cost")
			if rapid.IntRange(0, 5).Draw(t, "refund") == 0 {
				if err := rs.RefundN(ctx, key, lim, cost); err != nil {
					t.Fatal(err)
				}
				if err := ms.RefundN(ctx, key, lim, cost); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := rs.AllowN(ctx, key, lim, cost)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ms.AllowN(ctx, key, lim, cost)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%v step %d: AllowN(%d) = %+v on Redis, %+v in memory", lim, i, cost, got, want)
			}
		}
	})
}
