package failsafe_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/redistest"
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
	store := openRedis(t, srv.Addr)
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

// TestMeasureOverAdmission prints the table of docs/serve.md, "Failure
// modes": 4 processes sharing one Redis, limit 100 a day on one key, each
// process calling twice every 20 ms for 7 s: 1 s healthy (the store
// admits the limit), then 5 s of an incident, then 1 s healthy again. The
// incident is a slowdown (every Redis reply 200 ms late) or an outage
// (every reply held for 5 s). For each failure mode, before (the former
// defaults: 50 ms deadline, one breaker) and after (250 ms, 16
// partitions), it prints what the fleet admitted and how much of it was
// over the limit.
//
//	SLUICE_MEASURE=1 go test -count=1 -run TestMeasureOverAdmission -v ./failsafe/
func TestMeasureOverAdmission(t *testing.T) {
	measuring(t)
	srv := redistest.StartServer(t)
	proxy := newSlowProxy(t, srv.Addr)
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: 24 * time.Hour}
	configs := []struct {
		name string
		cfg  failsafe.Config
	}{
		{"before", failsafe.Config{Timeout: 50 * time.Millisecond, Partitions: 1}},
		{"after", failsafe.Config{Timeout: 250 * time.Millisecond, Partitions: 16}},
	}
	t.Logf("| incident | mode | before: admitted (over the limit) | after: admitted (over the limit) | calls before / after |")
	t.Logf("|---|---|---|---|---|")
	for _, incident := range []string{"slowdown 200 ms", "outage 5 s"} {
		for _, mode := range everyMode {
			var cells, calls [2]string
			for i, c := range configs {
				cfg := c.cfg
				cfg.Mode = mode
				f := newFleet(t, proxy.Addr(), 4, cfg)
				key := "measure:" + incident + mode.String() + c.name + time.Now().String()
				admitted, n := f.run(key, lim, 7*time.Second, func(at time.Duration) {
					switch {
					case at == time.Second && incident == "slowdown 200 ms":
						proxy.SetDelay(200 * time.Millisecond)
					case at == time.Second:
						proxy.Hold(time.Now().Add(5 * time.Second))
					case at == 6*time.Second:
						proxy.SetDelay(0)
					}
				})
				cells[i] = strconv.FormatInt(admitted, 10) + " (" + strconv.FormatInt(max(admitted-int64(lim.Capacity()), 0), 10) + ")"
				calls[i] = strconv.FormatInt(n, 10)
				proxy.SetDelay(0)
				time.Sleep(time.Second) // held replies flushed before the next run
			}
			t.Logf("| %s | %s | %s | %s | %s / %s |", incident, mode, cells[0], cells[1], calls[0], calls[1])
		}
	}
}

// run calls key from every process, 2 callers each, one call every 20 ms
// per caller, for d; at calls event at 1 s, 6 s (whole seconds since the
// start). It returns the decisions admitted and made.
func (f *fleet) run(key string, lim sluice.Limit, d time.Duration, event func(at time.Duration)) (admitted, calls int64) {
	var a, n atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for _, l := range f.procs {
		for range 2 {
			wg.Go(func() {
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for time.Now().Before(end) {
					if r, err := l.Allow(context.Background(), key, lim); err == nil && r.Allowed {
						a.Add(1)
					}
					n.Add(1)
					<-tick.C
				}
			})
		}
	}
	for s := time.Second; s < d; s += time.Second {
		time.Sleep(time.Until(start.Add(s)))
		event(s)
	}
	wg.Wait()
	return a.Load(), n.Load()
}
