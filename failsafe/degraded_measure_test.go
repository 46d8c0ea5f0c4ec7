package failsafe_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// measuring reports whether SLUICE_MEASURE asks for the measurement
// drivers of this file, which take tens of seconds and print tables
// (BENCHMARKS.md, docs/serve.md); they are skipped otherwise.
func measuring(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_MEASURE") == "" {
		t.Skip("a measurement: set SLUICE_MEASURE=1 to run it")
	}
}

// TestMeasureRedisDecisionLatency prints the latency of one decision on a
// local redis-server under concurrent load (64 callers for 5 s, 10,000
// keys), the figure that -store-timeout's default is chosen from.
func TestMeasureRedisDecisionLatency(t *testing.T) {
	measuring(t)
	srv := redistest.StartServer(t)
	ctx := context.Background()
	store, err := redisstore.New(ctx, redisstore.Config{URL: "redis://" + srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	for _, callers := range []int{16, 64, 256} {
		var (
			mu  sync.Mutex
			all []time.Duration
			wg  sync.WaitGroup
		)
		end := time.Now().Add(5 * time.Second)
		for c := range callers {
			wg.Go(func() {
				var mine []time.Duration
				for i := 0; time.Now().Before(end); i++ {
					start := time.Now()
					if _, err := store.Allow(ctx, "lat:"+strconv.Itoa((c*7919+i)%10_000), lim); err != nil {
						t.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(all)
		q := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
		t.Logf("callers=%d decisions=%d p50=%v p99=%v p99.9=%v max=%v", callers, len(all), q(0.5), q(0.99), q(0.999), all[len(all)-1])
	}
}
