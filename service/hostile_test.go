package service_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typepb "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// A client-chosen limit override and cost are checked against the
// operator's maxima: the amplification request (1048576 per YEAR, cost
// 1048576, on a sliding log rule) is refused with InvalidArgument over
// gRPC and 400 over HTTP, naming the maximum, and never reaches the store;
// requests within the maxima still work.
func TestOverrideAndCostAboveOperatorMaximaAreRefused(t *testing.T) {
	rules := mongo(5, config.Second)
	rules.rules[0].rl.Limit.Algorithm = sluice.SlidingLog
	h := start(t, t0, service.Config{Rules: rules, MaxOverride: 1000, MaxCost: 100})
	override := func(rpu uint32, d *rlpb.RateLimitDescriptor) *rlpb.RateLimitDescriptor {
		d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: rpu, Unit: typepb.RateLimitUnit_YEAR}
		return d
	}
	for _, tt := range []struct {
		name string
		d    *rlpb.RateLimitDescriptor
		hits uint32
		msg  string
	}{
		{"override and cost", withHits(override(1048576, desc("database", "users")), 1048576), 0, "maximum"},
		{"override", override(1048576, desc("database", "users")), 0, "1048576"},
		{"descriptor cost", withHits(desc("database", "users"), 1048576), 0, "1048576"},
		{"request cost", desc("database", "users"), 1048576, "1048576"},
	} {
		before := len(h.store.calls())
		_, err := h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", tt.hits, tt.d))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: %v; want InvalidArgument mentioning %q", tt.name, err, tt.msg)
		}
		if n := len(h.store.calls()) - before; n != 0 {
			t.Errorf("%s: %d store calls for a refused request", tt.name, n)
		}
	}
	resp, err := http.Post(h.http.URL+"/json", "application/json", strings.NewReader(
		`{"domain":"mongo_cps","hitsAddend":1048576,"descriptors":[{"entries":[{"key":"database","value":"users"}],"limit":{"requestsPerUnit":1048576,"unit":"YEAR"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST /json with the amplification request: %d, want 400", resp.StatusCode)
	}
	if _, err := h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, withHits(override(1000, desc("database", "users")), 100))); err != nil {
		t.Errorf("at the maxima: %v", err)
	}
}

// By default there is no maximum, as in envoyproxy/ratelimit: an operator's
// override of 1,000,000 per DAY and a cost of 1,000,000 (a byte or token
// count) are decided, not refused. A refusal would be an error, and Envoy
// admits a request whose rate limit call fails unless failure_mode_deny is
// set, so a default maximum turned such limits off. The amplification the
// maxima once guarded against is gone: a large override or cost on a
// sliding log is one entry, and the store call is one decision.
func TestLargeOverridesAndCostsAreDecidedByDefault(t *testing.T) {
	rules := mongo(5, config.Second)
	rules.rules[0].rl.Limit.Algorithm = sluice.SlidingLog
	h := start(t, t0, service.Config{Rules: rules})
	d := desc("database", "users")
	d.Limit = &rlpb.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1_000_000, Unit: typepb.RateLimitUnit_DAY}
	resp, err := h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, withHits(d, 1_000_000)))
	if err != nil {
		t.Fatalf("override 1,000,000/DAY with cost 1,000,000: %v; want a decision", err)
	}
	if got := resp.GetOverallCode(); got != pb.RateLimitResponse_OK {
		t.Errorf("override 1,000,000/DAY with cost 1,000,000: %v, want OK (the whole allowance)", got)
	}
	resp, err = h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, withHits(desc("database", "users"), 1_000_000)))
	if err != nil {
		t.Fatalf("cost 1,000,000 on a 5/s rule: %v; want a decision", err)
	}
	if got := resp.GetOverallCode(); got != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("cost 1,000,000 on a 5/s rule: %v, want OVER_LIMIT", got)
	}
}
