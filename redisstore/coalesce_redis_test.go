package redisstore_test

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// The conformance suite over a store that coalesces, on one node and on a
// Cluster: a decision in a batch is the decision alone.
func TestCoalescedConformance(t *testing.T) {
	opts := storetest.Options{Resolution: time.Microsecond, Unbounded: true}
	for name, url := range map[string]func(*testing.T) string{"single": func(t *testing.T) string { return singleURL(t) }, "cluster": clusterURL} {
		t.Run(name, func(t *testing.T) {
			u := url(t)
			storetest.RunWith(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter {
				return openConfig(t, redisstore.Config{URL: u, CoalesceWait: time.Millisecond}, clock)
			}, opts)
		})
	}
}

// Concurrent decisions on one hot key share script calls, and the limit
// still admits exactly its allowance: each decision in a batch is atomic.
// On a Cluster too, where a call's keys must share a slot.
func TestCoalescedDecisionsShareCallsAndStayExact(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		srv := redistest.StartServer(t)
		s := openConfig(t, redisstore.Config{URL: "redis://" + srv.Addr, CoalesceWait: time.Millisecond}, nil)
		hotKeyShares(t, s, "hot", srv)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := redistest.SharedCluster(t)
		s := openConfig(t, redisstore.Config{URL: clusterURL(t), CoalesceWait: time.Millisecond}, nil)
		key := "hot:" + strconv.FormatInt(time.Now().UnixNano(), 36)
		hotKeyShares(t, s, key, cl.MasterOf(t, s.Key(sluice.FixedWindow, key)))
	})
}

// hotKeyShares makes 64 goroutines' decisions on key, which srv holds, and
// checks that exactly the allowance was admitted in fewer script calls than
// decisions.
func hotKeyShares(t *testing.T, s *redisstore.Store, key string, srv *redistest.Server) {
	srv.Do(t, "CONFIG", "RESETSTAT")
	const goroutines, each, allowance = 64, 20, 500
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: allowance, Period: time.Hour}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				r, err := s.Allow(context.Background(), key, lim)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != allowance {
		t.Errorf("admitted %d of %d, want exactly %d", got, goroutines*each, allowance)
	}
	calls := scriptCalls(t, srv)
	if calls >= goroutines*each {
		t.Errorf("%d script calls for %d decisions: none coalesced", calls, goroutines*each)
	}
	t.Logf("%d decisions in %d script calls", goroutines*each, calls)
}

// scriptCalls returns how many EVALSHA and EVAL calls srv has run since its
// statistics were reset.
func scriptCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info := srv.Do(t, "INFO", "commandstats")
	n := 0
	for _, m := range regexp.MustCompile(`cmdstat_eval(?:sha)?:calls=(\d+)`).FindAllStringSubmatch(info, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// A decision through a coalescing store allocates at most once (rueidis's
// reply, shared by its batch), for every algorithm.
func TestCoalescedAllowNAllocatesOnce(t *testing.T) {
	if raceEnabled || testing.CoverMode() != "" {
		t.Skip("allocation counts vary under the race detector and with coverage")
	}
	s := openConfig(t, redisstore.Config{URL: singleURL(t), CoalesceWait: time.Millisecond}, nil)
	ctx := context.Background()
	for _, a := range sluice.Algorithms() {
		lim := sluice.Limit{Algorithm: a, Rate: 1_000_000, Period: time.Hour, Burst: 1_000_000}
		key := "coalesced-allocs:" + a.String()
		decide := func() {
			if r, err := s.AllowN(ctx, key, lim, 1); err != nil || !r.Allowed {
				t.Fatalf("%+v, %v", r, err)
			}
		}
		for range 100 { // the batch pool and rueidis's buffers made
			decide()
		}
		if got := testing.AllocsPerRun(200, decide); got > 1 {
			t.Errorf("%v: %.1f allocations per decision, want at most 1", a, got)
		}
	}
}

// A negative CoalesceWait is refused, not taken for zero.
func TestCoalesceWaitNegativeRefused(t *testing.T) {
	_, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://127.0.0.1:1", CoalesceWait: -time.Microsecond})
	if err == nil {
		t.Fatal("New accepted a negative CoalesceWait")
	}
}
