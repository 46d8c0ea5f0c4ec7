package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
)

// TestClusterFailover kills the master that serves a key and checks that,
// once a replica has taken over, decisions on that key resume without a
// restart of the client, and that no decision ever meets CROSSSLOT.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a real Cluster failover")
	}
	c := redistest.StartCluster(t, 3, 1)
	s := open(t, "redis+cluster://"+strings.Join(c.Addrs, ","), nil)
	ctx := context.Background()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1_000_000, Period: time.Hour}
	// limFor is lim under algorithm a (the sliding log at a rate it can hold).
	limFor := func(a sluice.Algorithm) sluice.Limit {
		l := lim.WithAlgorithm(a)
		l.Burst = l.Rate
		if a == sluice.SlidingLog {
			l.Rate = 1000
		}
		return l
	}
	key := "failover:user42"
	for _, a := range sluice.Algorithms() {
		if r, err := s.Allow(ctx, key, limFor(a)); err != nil || !r.Allowed {
			t.Fatalf("%v before the failover: %+v, %v", a, r, err)
		}
	}
	master := c.MasterOf(t, s.Key(sluice.FixedWindow, key))
	master.Kill()

	// Decisions fail while the slot has no master, then resume.
	deadline := time.Now().Add(30 * time.Second)
	var lastErr error
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, lastErr = s.Allow(cctx, key, lim)
		cancel()
		if lastErr == nil {
			break
		}
		if strings.Contains(lastErr.Error(), "CROSSSLOT") {
			t.Fatalf("CROSSSLOT during failover: %v", lastErr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("decisions did not resume within 30s of the master's death: %v", lastErr)
		}
		time.Sleep(50 * time.Millisecond) // waiting for the Cluster's failover, not passing time for an algorithm
	}
	for _, a := range sluice.Algorithms() {
		if _, err := s.Allow(ctx, key, limFor(a)); err != nil {
			t.Fatalf("%v after the failover: %v", a, err)
		}
	}
}
