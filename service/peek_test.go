package service_test

import (
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/config"
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
