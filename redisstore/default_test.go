package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/redisstore"
)

// layoutCases are the stores a key moved between layouts is tried on: one
// node and a Cluster, each alone and coalesced.
var layoutCases = []struct {
	name     string
	url      func(*testing.T) string
	coalesce time.Duration
}{
	{"single", func(t *testing.T) string { return singleURL(t) }, 0},
	{"cluster", clusterURL, 0},
	{"single-coalesced", func(t *testing.T) string { return singleURL(t) }, time.Millisecond},
	{"cluster-coalesced", clusterURL, time.Millisecond},
}

// onEachLayoutCase runs run in a subtest per layoutCases entry, with a
// storetest.NewStore that opens that case's store.
func onEachLayoutCase(t *testing.T, run func(*testing.T, storetest.NewStore)) {
	for _, c := range layoutCases {
		t.Run(c.name, func(t *testing.T) {
			u := c.url(t)
			run(t, func(t *testing.T, clock sluice.Clock) sluice.Limiter {
				return openConfig(t, redisstore.Config{URL: u, CoalesceWait: c.coalesce}, clock)
			})
		})
	}
}

// A key spent under the two-window counter and then decided under moments
// (a rule reloaded with the config's default) comes back as spent as the
// counter counted it, alone and in batches, on one node and on a Cluster:
// the moments script reads the counter's key as its KEYS[2].
func TestCounterKeyKeepsItsUnitsUnderMoments(t *testing.T) {
	onEachLayoutCase(t, storetest.RunCounterToMoments)
}

// The moments script deletes the counter's key it seeded from, and a peek
// neither seeds nor deletes.
func TestMomentsDeletesTheCounterKeyItSeedsFrom(t *testing.T) {
	srv := redistest.Single(t)
	clock := clocktest.New()
	s := open(t, "redis://"+srv.Addr, clock)
	ctx := context.Background()
	key := "seed:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":" + t.Name() // the shared server keeps the keys of earlier runs
	counter := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute}
	moments := counter
	moments.Buckets, moments.Moments = 16, 2
	if r, err := s.AllowN(ctx, key, counter, 10); err != nil || !r.Allowed {
		t.Fatalf("counter: AllowN(10) = %+v, %v", r, err)
	}
	exists := func() string { return strings.TrimSpace(srv.Do(t, "EXISTS", s.Key(sluice.SlidingWindow, key))) }
	if r, err := s.Peek(ctx, key, moments); err != nil || r.Remaining != 0 || exists() != "1" {
		t.Fatalf("moments: Peek = %+v, %v, the counter's key EXISTS %s; want 0 left and the key kept", r, err, exists())
	}
	if r, err := s.Allow(ctx, key, moments); err != nil || r.Allowed {
		t.Fatalf("moments: Allow = %+v, %v; want refused", r, err)
	}
	if got := exists(); got != "0" {
		t.Errorf("the counter's key after the moments decision: EXISTS %s, want 0", got)
	}
}

// In batches too: keys spent under the counter, then decided at once by
// many callers under moments, whose decisions share script calls (two keys
// each), are all refused, and their counter keys are gone.
func TestCoalescedMomentsSeedFromTheCounter(t *testing.T) {
	srv := redistest.StartServer(t)
	clock := clocktest.New()
	s := openConfig(t, redisstore.Config{URL: "redis://" + srv.Addr, CoalesceWait: time.Millisecond}, clock)
	ctx := context.Background()
	counter := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute}
	moments := counter
	moments.Buckets, moments.Moments = 16, 2
	const keys, each = 32, 20
	key := func(i int) string { return "batch-seed:" + strconv.Itoa(i) }
	for i := range keys {
		if r, err := s.AllowN(ctx, key(i), counter, 10); err != nil || !r.Allowed {
			t.Fatalf("counter: AllowN(%s, 10) = %+v, %v", key(i), r, err)
		}
	}
	srv.Do(t, "CONFIG", "RESETSTAT")
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			for range each {
				r, err := s.Allow(ctx, key(i), moments)
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
	if got := admitted.Load(); got != 0 {
		t.Errorf("moments admitted %d of %d on keys the counter counted full, want 0", got, keys*each)
	}
	if calls := scriptCalls(t, srv); calls >= keys*each {
		t.Errorf("%d script calls for %d decisions: none coalesced", calls, keys*each)
	} else {
		t.Logf("%d decisions in %d script calls", keys*each, calls)
	}
	for i := range keys {
		if got := strings.TrimSpace(srv.Do(t, "EXISTS", s.Key(sluice.SlidingWindow, key(i)))); got != "0" {
			t.Errorf("%s: the counter's key EXISTS %s, want 0", key(i), got)
		}
	}
}

// The way back: a key spent under moments and then decided under the
// two-window counter keeps every unit, alone and in batches, on one node
// and on a Cluster.
func TestMomentsKeyKeepsItsUnitsUnderTheCounter(t *testing.T) {
	onEachLayoutCase(t, storetest.RunMomentsToCounter)
}

// A key moved from moments to the counter brings only the units moments
// still count, on one node and on a Cluster, alone and in batches.
func TestStaleMomentsUnitsDoNotSeedTheCounter(t *testing.T) {
	onEachLayoutCase(t, storetest.RunStaleMomentsToCounter)
}
