package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// A request of several hits is counted as envoyproxy/ratelimit counts it:
// the hits past the near threshold ⌊limit × NEAR_LIMIT_RATIO⌋ (computed
// in float32, as there) are near_limit, and a request that crosses the
// limit is split: the hits up to the limit past the threshold are
// near_limit, the rest over_limit. statsd and Prometheus say the same.
func TestHitsAreSplitBetweenNearAndOverLimit(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rpu        uint32
		ratio      float64
		hits       []uint32
		near, over uint64
	}{
		// threshold 8: 7 within; 2 more cross it by 1.
		{"crossing the near threshold", 10, 0.8, []uint32{7, 2}, 1, 0},
		// threshold 8: 6 within; 6 more would make 12: 2 near (8..10), 2 over.
		{"crossing the limit", 10, 0.8, []uint32{6, 6}, 2, 2},
		// already over: every hit over.
		{"past the limit", 10, 0.8, []uint32{10, 3}, 2, 3},
		// float32(100) × float32(0.29) is 29, float64's 28.999…: 29 hits are not near.
		{"float32 threshold", 100, 0.29, []uint32{29}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, sink, store := statsdHarness(t, service.Config{Rules: mongo(tc.rpu, config.Minute), NearLimitRatio: tc.ratio}, nil)
			for _, n := range tc.hits {
				decideOne(t, h, request("mongo_cps", n, desc("database", "users")))
			}
			store.Flush()
			const rule = "mongo_cps.database_users"
			for suffix, want := range map[string]uint64{"near_limit": tc.near, "over_limit": tc.over} {
				if got := sink.Counter("ratelimit.service.rate_limit." + rule + "." + suffix); got != want {
					t.Errorf("statsd %s = %d, want %d", suffix, got, want)
				}
				if got := counter(t, h, "sluice_rls_"+suffix+"_total", rule); got != float64(want) {
					t.Errorf("sluice_rls_%s_total = %v, want %d", suffix, got, want)
				}
			}
		})
	}
}

// refusingLimiter refuses every request yet reports the limit's whole
// capacity left: a store whose Remaining contradicts its refusal.
type refusingLimiter struct{}

func (refusingLimiter) AllowN(_ context.Context, _ string, lim sluice.Limit, _ int) (sluice.Result, error) {
	return sluice.Result{Remaining: lim.Capacity(), RetryAfter: time.Second}, nil
}

// A refusal counts the request's hits over the limit, however many units
// the store says are left: a store that reports more left than the cost
// it refused cannot make the counters wrap around (2^64 − 9 over_limit
// hits for one refused hit).
func TestRefusalWithUnitsLeftCountsItsHitsOver(t *testing.T) {
	h, sink, store := statsdHarness(t, service.Config{Rules: mongo(10, config.Minute), Limiter: refusingLimiter{}}, nil)
	decideOne(t, h, request("mongo_cps", 1, desc("database", "users")))
	store.Flush()
	const rule = "mongo_cps.database_users"
	for suffix, want := range map[string]uint64{"near_limit": 0, "over_limit": 1} {
		if got := sink.Counter("ratelimit.service.rate_limit." + rule + "." + suffix); got != want {
			t.Errorf("statsd %s = %d, want %d", suffix, got, want)
		}
		if got := counter(t, h, "sluice_rls_"+suffix+"_total", rule); got != float64(want) {
			t.Errorf("sluice_rls_%s_total = %v, want %d", suffix, got, want)
		}
	}
}
