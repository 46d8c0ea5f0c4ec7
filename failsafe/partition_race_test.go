package failsafe_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// TestOpenPartitionsCountSurvivesRaces: partitions that open and close
// under concurrent decisions, while the store flaps and the Group's own
// breaker opens and probes, keep the count of open partitions exact: it
// stays within 0 and Partitions throughout, and once the store is back and
// every partition has probed it is 0 and the Group is available. A count
// that drifted (an opening counted twice, a closing missed) would keep the
// Group from ever logging the store back or closing its breaker.
func TestOpenPartitionsCountSurvivesRaces(t *testing.T) {
	const parts = 16
	var down atomic.Bool
	p := &keyedPrimary{bad: func(string) bool { return down.Load() }}
	clock := clocktest.New()
	g, err := failsafe.NewGroup(failsafe.Config{Primary: p, Partitions: parts, Threshold: 2,
		Backoff: 10 * time.Millisecond, MaxBackoff: 80 * time.Millisecond, Logger: slog.New(&logs{}), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	// One key per partition, so that every partition can probe at the end.
	keys := make([]string, parts)
	for i, found := 0, 0; found < parts; i++ {
		k := "k" + strconv.Itoa(i)
		if n := failsafe.PartitionOf(g, k); keys[n] == "" {
			keys[n] = k
			found++
		}
	}
	l := g.Limiter(failsafe.Open)
	ctx := context.Background()
	var wg sync.WaitGroup
	var bad atomic.Int64 // a count seen outside [0, parts]
	for w := range 4 {
		wg.Go(func() {
			for i := range 3000 {
				l.Decide(ctx, keys[(i*7+w)%parts], lim, 1)
				if n := g.OpenPartitions(); n < 0 || n > parts {
					bad.Store(int64(n))
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 600 {
			down.Store(i%3 != 0)
			clock.Advance(5 * time.Millisecond)
		}
	})
	wg.Wait()
	if n := bad.Load(); n != 0 {
		t.Errorf("OpenPartitions() was %d during the run, want within 0 and %d", n, parts)
	}
	down.Store(false)
	for range 2 { // the Group's probe, then each partition's
		clock.Advance(time.Second)
		for _, k := range keys {
			l.Decide(ctx, k, lim, 1)
		}
	}
	if n := g.OpenPartitions(); n != 0 || !g.Available() {
		t.Errorf("store back, every partition probed: %d open partitions, available %v; want 0, true (failed calls %d, asked %d)",
			n, g.Available(), p.failed.Load(), p.asked.Load())
	}
}
