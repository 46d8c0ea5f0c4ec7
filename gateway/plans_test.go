package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit/httplimittest"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/pgstore/pgplans"
	"github.com/sluicehq/sluice/plans"
)

const plansFile = `
plans: {tenant_header: X-Tenant}
limits:
  - {name: per_tenant, key: "header:X-Tenant", rate: 2r/m, algorithm: fixed_window}
routes:
  - {name: api, match: /, limits: [per_tenant]}
`

// Through the proxy, a tenant's override set in PostgreSQL takes effect
// at the plans cache's staleness (not a nanosecond before) and ends
// exactly at its expiry; assigning a plan changes the limit (the story of
// httplimittest.PlansScenario).
func TestProxyPlansFollowOverridesAndPlansInPostgres(t *testing.T) {
	srv := pgtest.StartServer(t)
	st, err := pgstore.Open(context.Background(), srv.URL(), pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after the gateway's
	ps := pgstore.NewPlanStore(st.Pool())

	sc := httplimittest.NewPlansScenario()
	cfg := parsed(t, plansFile, newUpstream(t))
	cfg.Limiter = store(t, sc.Clock)
	cfg.Plans.Limits = plans.NewCache(pgplans.New(ps), plans.Config{Clock: sc.Clock, Staleness: sc.Staleness})
	sc.Run(t, ps, "per_tenant", newGateway(t, cfg))
}

// A plans block the proxy could not act on is an error, with its line.
func TestProxyPlansBlockRefusesWhatItCannotDo(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"no header", "plans: {}\n", "needs tenant_header"},
		{"not a header", "plans: {tenant_header: \"X Tenant\"}\n", "not a header name"},
		{"unknown key", "plans: {tenant_header: X-Tenant, header: X}\n", "header"},
		{"only queues", "plans: {tenant_header: X-Tenant}\nlimits: [{name: q, key: ip, rate: 1r/s}]\nroutes: [{name: a, match: /, limits: [q]}]\n", "no route has a limit with an algorithm"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gateway.ParseFile("proxy.yaml", []byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "proxy.yaml:") {
				t.Fatalf("ParseFile = %v, want an error with its line saying %q", err, c.want)
			}
		})
	}
	f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\n"+plansFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gateway.New(f.Config); err == nil || !strings.Contains(err.Error(), "sluice proxy -plans") {
		t.Fatalf("New without plans.Limits = %v, want an error", err)
	}
}
