package service_test

import (
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/service"
)

// A descriptor's limit override applies only in a configured domain: as
// envoyproxy/ratelimit's GetLimit returns no limit for an unknown domain
// before it looks at the override, a request on another domain is OK
// however often it comes, and writes no key. In a configured domain the
// override applies, a rule matched or not.
func TestLimitOverrideOnAnUnknownDomainIsNotApplied(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: minute, requests_per_unit: 5}
`)
	h := start(t, t0, service.Config{Rules: rules})
	over := func(domain string) *pb.RateLimitRequest {
		d := desc("user", "bob")
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typepb.RateLimitUnit_MINUTE}
		return request(domain, 0, d)
	}
	for i := range 2 {
		resp := decideOne(t, h, over("unknown"))
		if resp.GetOverallCode() != pb.RateLimitResponse_OK || resp.GetStatuses()[0].GetCurrentLimit() != nil {
			t.Errorf("call %d on an unknown domain: %s, want OK without a limit", i+1, statusString(resp.GetStatuses()[0]))
		}
	}
	if calls := h.store.calls(); len(calls) != 0 {
		t.Errorf("store keys written for an unknown domain: %q", calls)
	}
	decideOne(t, h, over("d"))
	if resp := decideOne(t, h, over("d")); resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("second call with an override of 1/minute in a configured domain: %v, want OVER_LIMIT", resp.GetOverallCode())
	}
}
