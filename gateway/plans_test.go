package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/memstore"
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
// exactly at its expiry; assigning a plan changes the limit.
func TestProxyPlansFollowOverridesAndPlansInPostgres(t *testing.T) {
	srv := pgtest.StartServer(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, srv.URL(), pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ps := pgstore.NewPlanStore(st.Pool())

	base := time.Now().UTC().Truncate(time.Minute)
	clk := clocktest.At(base.Add(10 * time.Second))
	const staleness = 2 * time.Second
	up := newUpstream(t)
	f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: "+up.URL+"\n"+plansFile))
	if err != nil {
		t.Fatal(err)
	}
	mem := memstore.New(memstore.Config{Clock: clk})
	defer mem.Close()
	cfg := f.Config
	cfg.Logger, cfg.Limiter = quiet, mem
	cfg.Plans.Limits = plans.NewCache(pgplans.New(ps), plans.Config{Clock: clk, Staleness: staleness})
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	send := func(tenant string, n int) int {
		ok := 0
		for range n {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			r.Header.Set("X-Tenant", tenant)
			g.ServeHTTP(w, r)
			if w.Code == http.StatusOK {
				ok++
			}
		}
		return ok
	}

	if got := send("acme", 10); got != 2 {
		t.Fatalf("no plan: %d admitted, want the limit's 2", got)
	}
	read := clk.Now()
	if err := ps.SetPlan(ctx, "pro", []byte(`{"per_tenant": {"rate": 5, "period": "1m"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := ps.AssignPlan(ctx, "acme", "pro"); err != nil {
		t.Fatal(err)
	}
	expires := base.Add(10 * time.Minute) // a window starts at it
	if err := ps.SetOverride(ctx, "acme", "per_tenant", []byte(`{"rate": 7, "period": "1m"}`), expires); err != nil {
		t.Fatal(err)
	}
	clk.Set(read.Add(staleness - time.Nanosecond))
	if got := send("acme", 10); got != 0 {
		t.Fatalf("1ns before the staleness: %d more admitted, want 0", got)
	}
	clk.Set(read.Add(staleness))
	if got := send("acme", 10); got != 5 {
		t.Fatalf("at the staleness: %d more admitted, want 5 (the override's 7 less the 2 spent)", got)
	}
	clk.Set(expires.Add(-time.Nanosecond)) // a fresh window
	if got := send("acme", 10); got != 7 {
		t.Fatalf("1ns before expiry: %d admitted, want the override's 7", got)
	}
	clk.Set(expires) // a fresh window
	if got := send("acme", 10); got != 5 {
		t.Fatalf("at expiry: %d admitted, want the plan's 5", got)
	}
	if err := ps.AssignPlan(ctx, "acme", ""); err != nil {
		t.Fatal(err)
	}
	clk.Set(expires.Add(time.Minute)) // past the staleness, a fresh window
	if got := send("acme", 10); got != 2 {
		t.Fatalf("off its plan: %d admitted, want the limit's 2", got)
	}
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
