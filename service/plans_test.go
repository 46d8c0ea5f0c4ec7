package service_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/plans"
	"github.com/sluicehq/sluice/service"
)

// tenantSource is a plans.Source held in memory, changed by the test.
type tenantSource struct {
	mu sync.Mutex
	t  map[string]plans.Tenant
}

func (s *tenantSource) Tenant(_ context.Context, tenant string) (plans.Tenant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.t[tenant], nil
}

func (s *tenantSource) set(tenant string, t plans.Tenant) {
	s.mu.Lock()
	s.t[tenant] = t
	s.mu.Unlock()
}

// An override written to the plans' database reaches an RLS call once the
// cache's staleness has passed (not before), and the rule's limit is back
// the instant the override expires.
func TestTenantOverrideTakesEffectWithinStalenessAndExpiresOnTime(t *testing.T) {
	const t0 = 1_700_000_000
	src := &tenantSource{t: map[string]plans.Tenant{}}
	var lookup service.TenantLimitFunc
	cfg := service.Config{
		Rules: (&fakeRules{domain: "api"}).add(fixed("api.tenant", 2, config.Minute), "tenant", ""),
		TenantLimit: func(ctx context.Context, d string, e []config.Entry) (sluice.Limit, bool) {
			return lookup(ctx, d, e)
		},
	}
	h := start(t, t0, cfg)
	cache := plans.NewCache(src, plans.Config{Clock: h.clock, Staleness: time.Second})
	lookup = service.TenantLimitsBy(cache, "tenant")
	ctx := context.Background()
	call := func() *pb.RateLimitResponse_DescriptorStatus {
		t.Helper()
		resp, err := h.svc.ShouldRateLimit(ctx, request("api", 0, desc("tenant", "acme")))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Statuses[0]
	}
	if st := call(); st.GetCurrentLimit().GetRequestsPerUnit() != 2 {
		t.Fatalf("before any override: %s, want the rule's 2 per minute", statusString(st))
	}
	expires := h.clock.Now().Add(10 * time.Second)
	src.set("acme", plans.Tenant{Overrides: map[string]plans.Override{
		plans.Name("api", "tenant"): {Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Minute, Burst: 100}, Expires: expires},
	}})
	h.clock.Advance(999 * time.Millisecond)
	if st := call(); st.GetCurrentLimit().GetRequestsPerUnit() != 2 {
		t.Errorf("within the staleness: %s, want the cached 2 per minute still", statusString(st))
	}
	h.clock.Advance(time.Millisecond)
	st := call()
	if st.GetCurrentLimit().GetRequestsPerUnit() != 100 || st.GetCode() != pb.RateLimitResponse_OK ||
		st.GetCurrentLimit().GetUnit() != pb.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("once the staleness has passed: %s, want OK at 100 per minute", statusString(st))
	}
	if st.GetLimitRemaining() != 100-3 {
		t.Errorf("remaining %d, want 97: the key's count (3 spent) goes on under the override", st.GetLimitRemaining())
	}
	h.clock.Set(expires.Add(-time.Nanosecond))
	if st := call(); st.GetCurrentLimit().GetRequestsPerUnit() != 100 {
		t.Errorf("1 ns before the expiry: %s, want the override", statusString(st))
	}
	h.clock.Set(expires)
	if st := call(); st.GetCurrentLimit().GetRequestsPerUnit() != 2 || st.GetCode() != pb.RateLimitResponse_OVER_LIMIT {
		t.Errorf("at the expiry: %s, want the rule's 2 per minute, over the limit", statusString(st))
	}
}

// A tenant's plan gives its limit to every descriptor whose name it holds;
// another tenant, and a descriptor with no tenant entry, keep the rule's.
func TestTenantPlanSelectsLimitByTenantEntry(t *testing.T) {
	src := &tenantSource{t: map[string]plans.Tenant{
		"pro": {Plan: "pro", Limits: map[string]sluice.Limit{
			"api.tenant": {Algorithm: sluice.FixedWindow, Rate: 50, Period: time.Hour, Burst: 50},
		}},
	}}
	cache := plans.NewCache(src, plans.Config{})
	rules := (&fakeRules{domain: "api"}).
		add(fixed("api.tenant", 5, config.Hour), "tenant", "").
		add(fixed("api.user", 7, config.Hour), "user", "")
	h := start(t, 1_700_000_000, service.Config{Rules: rules, TenantLimit: service.TenantLimitsBy(cache, "tenant")})
	resp, err := h.svc.ShouldRateLimit(context.Background(), request("api", 0,
		desc("tenant", "pro"), desc("tenant", "free"), desc("user", "pro")))
	if err != nil {
		t.Fatal(err)
	}
	want := []uint32{50, 5, 7}
	for i, st := range resp.Statuses {
		if got := st.GetCurrentLimit().GetRequestsPerUnit(); got != want[i] {
			t.Errorf("descriptor %d: %s, want %d per hour", i, statusString(st), want[i])
		}
	}
}

// A tenant's plan limit reaches the store billable exactly when the rule it
// applies to is marked billable: a plan sets the limit's shape, and the
// operator's billable: true on the rule still decides whether PostgreSQL
// keeps its periods as the ledger.
func TestTenantPlanLimitIsBillableAsItsRuleIs(t *testing.T) {
	src := &tenantSource{t: map[string]plans.Tenant{
		"pro": {Plan: "pro", Limits: map[string]sluice.Limit{
			"api.tenant": {Algorithm: sluice.FixedWindow, Rate: 50, Period: time.Hour, Burst: 50},
			"api.user":   {Algorithm: sluice.FixedWindow, Rate: 60, Period: time.Hour, Burst: 60, Billable: true},
		}},
	}}
	billed := fixed("api.tenant", 5, config.Hour)
	billed.Limit.Billable = true
	rules := (&fakeRules{domain: "api"}).add(billed, "tenant", "").add(fixed("api.user", 7, config.Hour), "user", "")
	h := start(t, 1_700_000_000, service.Config{Rules: rules, TenantLimit: service.TenantLimitsBy(plans.NewCache(src, plans.Config{}), "tenant")})
	for _, req := range []*pb.RateLimitRequest{request("api", 0, desc("tenant", "pro")), request("api", 0, desc("user", "pro"))} {
		if _, err := h.svc.ShouldRateLimit(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	h.store.mu.Lock()
	defer h.store.mu.Unlock()
	if len(h.store.lims) != 2 || h.store.lims[0].Rate != 50 || !h.store.lims[0].Billable {
		t.Errorf("the billable rule's plan limit reached the store as %+v, want 50 per hour, billable", h.store.lims)
	}
	if len(h.store.lims) == 2 && (h.store.lims[1].Billable || h.store.lims[1].Rate != 7) {
		t.Errorf("a rule that is not billable, with no tenant entry, reached the store as %+v, want the rule's 7, not billable", h.store.lims[1])
	}
}

// BenchmarkTenantLimit is an RLS decision of a tenant descriptor with the
// plans' lookup (a cached tenant on a plan) and without it.
func BenchmarkTenantLimit(b *testing.B) {
	src := &tenantSource{t: map[string]plans.Tenant{"acme": {Plan: "pro", Limits: map[string]sluice.Limit{
		"api.tenant": {Algorithm: sluice.FixedWindow, Rate: 1 << 30, Period: time.Hour, Burst: 1 << 30},
	}}}}
	for _, on := range []bool{false, true} {
		name := map[bool]string{false: "off", true: "on"}[on]
		b.Run(name, func(b *testing.B) {
			cfg := service.Config{Rules: (&fakeRules{domain: "api"}).add(fixed("api.tenant", 1<<30, config.Hour), "tenant", "")}
			if on {
				cfg.TenantLimit = service.TenantLimitsBy(plans.NewCache(src, plans.Config{}), "tenant")
			}
			h := start(b, 1_700_000_000, cfg)
			req := request("api", 0, desc("tenant", "acme"))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.svc.ShouldRateLimit(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// askedLimits is a service.TenantLimits that has no limits and records
// the tenants it was asked about.
type askedLimits struct {
	mu    sync.Mutex
	asked []string
}

func (a *askedLimits) Limit(_ context.Context, tenant, _ string) (sluice.Limit, bool) {
	a.mu.Lock()
	a.asked = append(a.asked, tenant)
	a.mu.Unlock()
	return sluice.Limit{}, false
}

// A descriptor's tenant that no tenant may be called (as plans.CheckName
// says, the filter the middleware and the proxy apply) is not looked up,
// whatever TenantLimits the service is given.
func TestTenantLimitsByAsksNothingForAnImpossibleTenant(t *testing.T) {
	l := &askedLimits{}
	fn := service.TenantLimitsBy(l, "tenant")
	for _, tenant := range []string{"", "a\nb", "\xff", strings.Repeat("a", plans.MaxNameLen+1), "acme"} {
		fn(context.Background(), "api", []config.Entry{{Key: "tenant", Value: tenant}})
	}
	if want := []string{"acme"}; !slices.Equal(l.asked, want) {
		t.Fatalf("asked about %q, want only %q", l.asked, want)
	}
}
