package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// TestCheckOnlyDescriptorReadsTheKey: a descriptor with hits_addend 0 is
// answered from the key's state, read without spending, as
// envoyproxy/ratelimit answers it: after 2 hits on a 7/minute key,
// remaining 5 and the real reset (the end of the minute); the next hit
// leaves 4; at the limit the check is OK with remaining 0; a key never hit
// reads as fresh. Through every face.
func TestCheckOnlyDescriptorReadsTheKey(t *testing.T) {
	for _, fc := range faces {
		t.Run(fc.name, func(t *testing.T) {
			clock := clocktest.At(time.Unix(t0, 0)) // 20 s into a minute
			mem := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
			t.Cleanup(func() { mem.Close() })
			h := start(t, t0, service.Config{Rules: mongo(7, config.Minute), Limiter: mem})
			call := func(req *pb.RateLimitRequest) string {
				t.Helper()
				resp, err := fc.call(h, req)
				if err != nil {
					t.Fatalf("ShouldRateLimit: %v", err)
				}
				return statusString(resp.GetStatuses()[0])
			}
			check := func() *pb.RateLimitRequest {
				return request("mongo_cps", 0, withHits(desc("database", "users"), 0))
			}
			if got, want := call(check()), `OK remaining=7 limit={7 MINUTE ""} reset=40s`; got != want {
				t.Errorf("check of a key never hit: %s, want %s", got, want)
			}
			call(request("mongo_cps", 1, desc("database", "users")))
			call(request("mongo_cps", 1, desc("database", "users")))
			clock.Advance(10 * time.Second)
			if got, want := call(check()), `OK remaining=5 limit={7 MINUTE ""} reset=30s`; got != want {
				t.Errorf("check after 2 hits: %s, want %s", got, want)
			}
			if got, want := call(request("mongo_cps", 1, desc("database", "users"))), `OK remaining=4 limit={7 MINUTE ""} reset=30s`; got != want {
				t.Errorf("a hit after the check: %s, want %s (the check spent nothing)", got, want)
			}
			call(request("mongo_cps", 4, desc("database", "users")))
			if got, want := call(check()), `OK remaining=0 limit={7 MINUTE ""} reset=30s`; got != want {
				t.Errorf("check at the limit: %s, want %s", got, want)
			}
		})
	}
}

// TestCheckOnlyDescriptorFailureModes: while the store fails, a check-only
// descriptor is answered by its rule's failure mode, as a hit is: open OK
// with the whole limit, closed OVER_LIMIT (and a store error counted), local
// the local store's share (10/s over 2 nodes: 5).
func TestCheckOnlyDescriptorFailureModes(t *testing.T) {
	clock := clocktest.At(time.Unix(t0, 0))
	mem := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	store := &flaky{Limiter: mem}
	p := service.FailurePolicy{Mode: failsafe.Open, Nodes: 2, Threshold: 1000, Clock: clock, Local: newLocal(t, clock)}
	h := start(t, t0, service.Config{Rules: modeRules(10, config.Second), Limiter: store, Failure: &p})
	check := func(key string) string {
		t.Helper()
		resp, err := h.svc.ShouldRateLimit(context.Background(), request("d", 0, withHits(desc(key, "x"), 0)))
		if err != nil {
			t.Fatalf("check %s: %v", key, err)
		}
		st := resp.GetStatuses()[0]
		return fmt.Sprintf("%v %d", st.GetCode(), st.GetLimitRemaining())
	}
	for range 3 {
		h.svc.ShouldRateLimit(context.Background(), request("d", 1, desc("open", "x")))
	}
	if got, want := check("open"), "OK 7"; got != want {
		t.Errorf("check after 3 hits, store up: %s, want %s", got, want)
	}
	store.down.Store(true)
	for key, want := range map[string]string{"open": "OK 10", "closed": "OVER_LIMIT 0", "local": "OK 5", "default": "OK 10"} {
		if got := check(key); got != want {
			t.Errorf("check of the %s rule, store down: %s, want %s", key, got, want)
		}
	}
	if got := counter(t, h, "sluice_rls_store_errors_total", "d.closed"); got != 1 {
		t.Errorf("store errors of d.closed = %v, want 1", got)
	}
}
