package failsafe_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/memstore"
)

// fleet is n process-equivalents sharing one Redis: each has its own Redis
// client, its own local store and its own failsafe Group, as n sluice
// serve processes do.
type fleet struct {
	procs []*failsafe.Limiter
}

func newFleet(t testing.TB, addr string, n int, cfg failsafe.Config) *fleet {
	t.Helper()
	f := &fleet{}
	for range n {
		store := openRedis(t, addr)
		local := memstore.New(memstore.Config{})
		t.Cleanup(func() { local.Close() })
		c := cfg
		c.Primary, c.Local, c.Nodes = store, local, n
		if c.Logger == nil {
			c.Logger = slog.New(slog.DiscardHandler)
		}
		l, err := failsafe.New(c)
		if err != nil {
			t.Fatal(err)
		}
		f.procs = append(f.procs, l)
	}
	return f
}

// burst sends calls decisions on key, spread evenly over the processes,
// each process through 8 concurrent callers, and returns how many were
// admitted.
func (f *fleet) burst(key string, lim sluice.Limit, calls int) int64 {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i, l := range f.procs {
		var left atomic.Int64
		left.Store(int64(calls/len(f.procs) + min(1, max(0, calls%len(f.procs)-i))))
		for range 8 {
			wg.Go(func() {
				for left.Add(-1) >= 0 {
					if r, err := l.Allow(context.Background(), key, lim); err == nil && r.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	return admitted.Load()
}

// localBound is the most a fleet of n processes in Local mode admits of
// lim while its store is slow or down for less than a window: what the
// store admitted (at most the limit) and each process's share.
func localBound(lim sluice.Limit, n int) int {
	return lim.Capacity() + n*failsafe.Split(lim, n).Capacity()
}

// TestBurstOverProcessesOnASlowStoreStaysWithinTheBound drives a burst of
// 400 decisions over 4 processes sharing one real Redis, limit 100 a day,
// after 60 admitted while Redis was healthy. Redis healthy throughout: the
// fleet admits exactly the limit. Redis's replies slowed past the
// decisions' deadline (600 ms against serve's 250 ms) for the burst: in
// Local mode (serve's default) the fleet admits at most the stated bound,
// the limit plus each process's share (100 + 4 × 25 = 200), and at least
// what the store admitted; in Open mode (the former default) it admits
// the burst. (Local mode spends at most a share of what the store last
// reported left, so it admits about the limit: see
// TestLocalModeSpendsAShareOfWhatTheStoreLeft.)
func TestBurstOverProcessesOnASlowStoreStaysWithinTheBound(t *testing.T) {
	srv := redistest.StartServer(t)
	proxy := newSlowProxy(t, srv.Addr)
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: 24 * time.Hour}
	const n, before, calls = 4, 60, 400
	for _, tc := range []struct {
		name string
		mode failsafe.Mode
		slow bool
	}{{"healthy", failsafe.Local, false}, {"slow local", failsafe.Local, true}, {"slow open", failsafe.Open, true}} {
		t.Run(tc.name, func(t *testing.T) {
			proxy.SetDelay(0)
			// serve's deadline, 250 ms; healthy, a deadline the store
			// always meets (under the race detector on a loaded machine a
			// healthy decision can take longer than 250 ms, and is then
			// the failure mode's).
			timeout := 250 * time.Millisecond
			if !tc.slow {
				timeout = 10 * time.Second
			}
			f := newFleet(t, proxy.Addr(), n, failsafe.Config{Mode: tc.mode, Partitions: 16, Timeout: timeout})
			key := "bound:" + tc.name + ":" + time.Now().String()
			pre := f.burst(key, lim, before) // all admitted, unless a decision ran out of time
			if tc.slow {
				proxy.SetDelay(600 * time.Millisecond)
				defer proxy.SetDelay(0)
			}
			got := pre + f.burst(key, lim, calls)
			bound := int64(localBound(lim, n))
			switch {
			case !tc.slow && got != int64(lim.Capacity()):
				t.Errorf("healthy store: %d admitted, want exactly the limit %d", got, lim.Capacity())
			case tc.slow && tc.mode == failsafe.Local && (got > bound || got < pre):
				t.Errorf("slow store, local: %d admitted, want between %d (admitted before the slowdown) and the bound %d", got, pre, bound)
			case tc.slow && tc.mode == failsafe.Open && got <= bound:
				t.Errorf("slow store, open: %d admitted, want the burst (over %d): the store was not slowed", got, bound)
			}
			t.Logf("%s: %d admitted of %d, limit %d, bound %d", tc.name, got, before+calls, lim.Capacity(), bound)
		})
	}
}
