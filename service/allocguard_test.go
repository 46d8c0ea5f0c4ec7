package service_test

import (
	"context"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// allocCase is one shape of ShouldRateLimit call and the most allocations
// it may make, the service's and the memory store's together.
type allocCase struct {
	name    string
	headers service.HeaderMode
	req     *pb.RateLimitRequest
	code    pb.RateLimitResponse_Code
	max     float64
	failure bool // behind Config.Failure (a breaker, a bounded store call), called with a deadline
	observe bool // with a Config.Observer, which sees the store key of a refusal
}

// allocCases: what each call costs today. A call returns its response,
// which it must allocate (one block for one descriptor, its store key
// included when short); the store key of each other descriptor, and the
// headers that depend on the decision, are the rest;
// everything else a decision needs is pooled or derived once per rule.
var allocCases = []allocCase{
	{"one descriptor, admitted, no headers", service.HeadersOff, request("api", 0, desc("a", "1")), pb.RateLimitResponse_OK, 1, false, false},
	{"one descriptor, admitted, draft-11 headers", service.HeadersDraft11, request("api", 0, desc("a", "1")), pb.RateLimitResponse_OK, 3, false, false},
	{"one descriptor, denied, draft-11 headers", service.HeadersDraft11, request("api", 0, desc("z", "1")), pb.RateLimitResponse_OVER_LIMIT, 3, false, false},
	{"three descriptors, admitted, legacy headers", service.HeadersLegacy, request("api", 0, desc("a", "1"), desc("b", "1"), desc("c", "1")), pb.RateLimitResponse_OK, 8, false, false},
	{"no rule", service.HeadersDraft11, request("api", 0, desc("nothing", "1")), pb.RateLimitResponse_OK, 1, false, false},
	{"one descriptor, admitted, no headers, failure policy", service.HeadersOff, request("api", 0, desc("a", "1")), pb.RateLimitResponse_OK, 1, true, false},
	{"one descriptor, denied, draft-11 headers, observed", service.HeadersDraft11, request("api", 0, desc("z", "1")), pb.RateLimitResponse_OVER_LIMIT, 3, false, true},
}

// ShouldRateLimit allocates no more than it does today, with metrics on, on
// the memory store (its clock stopped), behind the failure policy or not: an allocation added to the hot path fails this test
// (testing.AllocsPerRun counts exactly, unlike a timing).
func TestShouldRateLimitAllocations(t *testing.T) {
	skipIfCountsVary(t)
	for _, c := range allocCases {
		t.Run(c.name, func(t *testing.T) {
			got := allocsPerCall(t, c, nil)
			t.Logf("%.1f allocs per call", got)
			if got > c.max {
				t.Errorf("ShouldRateLimit makes %.1f allocations per call, at most %v before", got, c.max)
			}
		})
	}
}

// The guard sees a single allocation added to a decision: with a store
// that allocates once per call, every case counts exactly one more.
func TestShouldRateLimitAllocationsSeeOneMore(t *testing.T) {
	skipIfCountsVary(t)
	for _, c := range allocCases {
		want := allocsPerCall(t, c, nil) + float64(descriptorsWithRule(c.req))
		if got := allocsPerCall(t, c, func(l sluice.Limiter) sluice.Limiter { return allocatingLimiter{l} }); got != want {
			t.Errorf("%s: %.1f allocations with one more per store call, want %.1f", c.name, got, want)
		}
	}
}

// descriptorsWithRule is how many of req's descriptors reach the store.
func descriptorsWithRule(req *pb.RateLimitRequest) int {
	n := 0
	for _, d := range req.GetDescriptors() {
		if d.GetEntries()[0].GetKey() != "nothing" {
			n++
		}
	}
	return n
}

// allocSink keeps allocatingLimiter's allocation on the heap.
var allocSink *[16]byte

// allocatingLimiter is a store that allocates once per decision more
// than the store it wraps.
type allocatingLimiter struct{ sluice.Limiter }

func (a allocatingLimiter) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	allocSink = new([16]byte)
	return a.Limiter.AllowN(ctx, key, lim, cost)
}

// allocsPerCall is the allocations of one call of case c, on a memory
// store wrapped by wrap (when not nil), after a first call that derives
// what is derived once.
func allocsPerCall(t *testing.T, c allocCase, wrap func(sluice.Limiter) sluice.Limiter) float64 {
	t.Helper()
	const many = 1 << 30 // never reached: every call is admitted
	rules := (&fakeRules{domain: "api"}).
		add(fixed("api.a", many, config.Second), "a", "").
		add(fixed("api.b", many, config.Minute), "b", "").
		add(fixed("api.c", many, config.Hour), "c", "").
		add(fixed("api.z", 1, config.Second), "z", "") // the store denies all but the first
	mem := memstore.New(memstore.Config{Clock: clocktest.At(time.Unix(t0, 0)), SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	var lim sluice.Limiter = mem
	if wrap != nil {
		lim = wrap(lim)
	}
	cfg := service.Config{Rules: rules, Headers: c.headers, Limiter: lim}
	if c.observe {
		cfg.Observer = discardObserver{}
	}
	ctx := context.Background()
	if c.failure {
		cfg.Failure = &service.FailurePolicy{Timeout: time.Second}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Hour) // as gRPC's, from Envoy's timeout
		t.Cleanup(cancel)
	}
	h := start(t, t0, cfg)
	call := func() {
		resp, err := h.svc.ShouldRateLimit(ctx, c.req)
		if err != nil || resp.GetOverallCode() != c.code {
			t.Fatalf("%v, %v; want %v", resp.GetOverallCode(), err, c.code)
		}
	}
	if _, err := h.svc.ShouldRateLimit(ctx, c.req); err != nil { // derives what is derived once
		t.Fatal(err)
	}
	return testing.AllocsPerRun(1000, call)
}

// discardObserver is an Observer that keeps nothing.
type discardObserver struct{}

func (discardObserver) Observe(service.Decision) {}

// skipIfCountsVary skips a test of allocation counts where they vary: under
// the race detector and with coverage counters.
func skipIfCountsVary(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random; run without -race")
	}
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
}
