package service_test

import (
	"testing"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/service"
)

// Config.ShadowMode is envoyproxy/ratelimit's SHADOW_MODE: the request is
// decided as without it (statuses OVER_LIMIT, over_limit counted, no
// metadata from an over descriptor, the headers of the descriptor closest
// to its limit), and only the overall code turns OK, counted in
// global_shadow_mode.
func TestGlobalShadowModeFlipsOnlyTheOverallCode(t *testing.T) {
	rules := configtest.Parse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {from: a}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {from: b}
`)
	h, sink, store := statsdHarness(t, service.Config{
		Rules: rules, ShadowMode: true, DynamicMetadata: true, Headers: service.HeadersLegacy,
	}, nil)
	req := request("d", 0, desc("a", "1"), desc("b", "2"))
	decideOne(t, h, req)
	resp := decideOne(t, h, req)
	if resp.GetOverallCode() != pb.RateLimitResponse_OK {
		t.Errorf("overall %v, want OK", resp.GetOverallCode())
	}
	if st := resp.GetStatuses()[0]; st.GetCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("a's status %s, want OVER_LIMIT", statusString(st))
	}
	md := resp.GetDynamicMetadata().GetFields()["metadata"].GetStructValue().AsMap()
	if md["from"] != "b" {
		t.Errorf("metadata %v, want b's only (a is over)", md)
	}
	if hm := headerMap(resp); hm["RateLimit-Remaining"] != "0" || hm["RateLimit-Limit"] != "1" {
		t.Errorf("headers %v, want a's (limit 1, remaining 0)", hm)
	}
	wantCounters(t, h, "d.a", map[string]float64{
		"sluice_rls_over_limit_total":  1,
		"sluice_rls_shadow_mode_total": 0,
	})
	store.Flush()
	for name, n := range map[string]uint64{
		"ratelimit.service.rate_limit.d.a.over_limit": 1,
		"ratelimit.service.global_shadow_mode":        1,
	} {
		if got := sink.Counter(name); got != n {
			t.Errorf("%s = %d, want %d", name, got, n)
		}
	}
	if _, ok := sink.LoadCounter("ratelimit.service.rate_limit.d.a.shadow_mode"); ok {
		t.Error("shadow_mode counted for a rule not in shadow mode")
	}
}
