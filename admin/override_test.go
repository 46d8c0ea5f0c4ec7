package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/plans"
	"github.com/sluicehq/sluice/service"
)

// jsonPlans is a PlanWriter and a plans.Source over one map, holding
// limits as JSON as a database does.
type jsonPlans struct {
	mu        sync.Mutex
	overrides map[string]plans.RawOverride // by tenant/name
}

func (j *jsonPlans) SetPlan(context.Context, string, []byte) error       { return nil }
func (j *jsonPlans) AssignPlan(context.Context, string, string) error    { return nil }
func (j *jsonPlans) ClearOverride(context.Context, string, string) error { return nil }

func (j *jsonPlans) SetOverride(_ context.Context, tenant, name string, limit []byte, exp time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.overrides[tenant+"/"+name] = plans.RawOverride{Name: name, Limit: limit, Expires: exp}
	return nil
}

func (j *jsonPlans) Tenant(_ context.Context, tenant string) (plans.Tenant, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var os []plans.RawOverride
	for k, o := range j.overrides {
		if strings.HasPrefix(k, tenant+"/") {
			os = append(os, o)
		}
	}
	return plans.DecodeTenant("", nil, os)
}

type oneRule struct{ r *config.RateLimit }

func (o oneRule) Lookup(domain string, entries []config.Entry) *config.RateLimit {
	if domain == "api" && len(entries) == 1 && entries[0].Key == "tenant" {
		return o.r
	}
	return nil
}

// An override set through the admin API (as another process would, so
// without invalidating this cache) is audited, reaches an RLS call once
// the staleness has passed and not before, and ends at its expiry.
func TestOverrideThroughTheAPIReachesRLSWithinStalenessAndExpires(t *testing.T) {
	store := &jsonPlans{overrides: map[string]plans.RawOverride{}}
	f := newFixture(t, admin.Config{Plans: store})
	cache := plans.NewCache(store, plans.Config{Clock: f.clock, Staleness: 2 * time.Second})
	mem := memstore.New(memstore.Config{Clock: f.clock, SweepInterval: -1})
	defer mem.Close()
	rule := &config.RateLimit{FullKey: "api.tenant", Unit: config.Minute, UnitMultiplier: 1, RequestsPerUnit: 1,
		Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Minute, Burst: 1}}
	svc, err := service.New(service.Config{Limiter: mem, Rules: oneRule{rule}, TenantLimit: service.TenantLimitsBy(cache, "tenant")})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	rls := func() uint32 {
		t.Helper()
		resp, err := svc.ShouldRateLimit(context.Background(), &pb.RateLimitRequest{Domain: "api",
			Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "tenant", Value: "acme"}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Statuses[0].GetCurrentLimit().GetRequestsPerUnit()
	}
	if got := rls(); got != 1 {
		t.Fatalf("before the override: %d per minute, want the rule's 1", got)
	}
	exp := f.clock.Now().Add(time.Minute)
	body, _ := json.Marshal(map[string]any{"limit": json.RawMessage(`{"rate": 50, "period": "1m"}`), "expires": exp})
	if code, msg, _ := f.do(t, "PUT", "/v1/tenants/acme/overrides/api.tenant", "Bearer "+token, string(body)); code != http.StatusNoContent {
		t.Fatalf("setting the override: %d %s", code, msg)
	}
	lines := f.auditLines(t)
	if l := lines[len(lines)-1]; l["who"] != "token" || l["status"] != float64(204) || l["target"] != "/v1/tenants/acme/overrides/api.tenant" {
		t.Errorf("the override's audit line: %v", l)
	}
	f.clock.Advance(2*time.Second - time.Nanosecond)
	if got := rls(); got != 1 {
		t.Errorf("within the staleness: %d, want the cached rule's 1", got)
	}
	f.clock.Advance(time.Nanosecond)
	if got := rls(); got != 50 {
		t.Errorf("at the staleness: %d, want the override's 50", got)
	}
	f.clock.Set(exp)
	if got := rls(); got != 1 {
		t.Errorf("at the expiry: %d, want the rule's 1 again", got)
	}
}
