package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/pgstore"
)

// tenantStatus sends GET url as tenant and returns the status.
func tenantStatus(t *testing.T, url, tenant string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("X-Tenant", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// until sends requests of tenant every 10 ms until one gets want, and
// returns when it did; past deadline the test fails with what.
func until(t *testing.T, url, tenant string, want int, deadline time.Time, what string) time.Time {
	t.Helper()
	for {
		if tenantStatus(t, url, tenant) == want {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %d by the deadline", what, want)
		}
		time.Sleep(10 * time.Millisecond) // polling a real process
	}
}

// A real sluice proxy -plans: a plan assigned in PostgreSQL raises the
// tenant's limit within the staleness, an override lowers it within the
// staleness, and the override ends at its expiry, not before.
func TestProxyPlansOnPostgres(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	srv := pgtest.StartServer(t)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, srv.URL(), pgstore.Config{}) // the schema, as serve makes it
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ps := pgstore.NewPlanStore(st.Pool())
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	os.WriteFile(cfg, []byte(`
plans: {tenant_header: X-Tenant}
limits:
  - {name: per_tenant, key: "header:X-Tenant", rate: 2r/h, algorithm: fixed_window}
routes:
  - {name: api, match: /, limits: [per_tenant]}
`), 0o644)
	const staleness = 300 * time.Millisecond
	const slack = 2 * time.Second // a loaded machine's scheduling, and a read of the database
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL, "-plans", srv.URL(), "-plans-staleness", staleness.String())
	url := p.url + "/x"
	for i, want := range []int{200, 200, 429} {
		if got := tenantStatus(t, url, "acme"); got != want {
			t.Fatalf("request %d on no plan: %d, want %d", i+1, got, want)
		}
	}

	if err := ps.SetPlan(ctx, "pro", []byte(`{"per_tenant": {"rate": 1000, "period": "1h"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := ps.AssignPlan(ctx, "acme", "pro"); err != nil {
		t.Fatal(err)
	}
	set := time.Now()
	took := until(t, url, "acme", 200, set.Add(staleness+slack), "plan assigned").Sub(set)
	t.Logf("the plan showed after %v (staleness %v)", took, staleness)

	expires := time.Now().Add(staleness + 2*time.Second).Truncate(time.Microsecond)
	if err := ps.SetOverride(ctx, "acme", "per_tenant", []byte(`{"rate": 1, "period": "1h"}`), expires); err != nil {
		t.Fatal(err)
	}
	set = time.Now()
	took = until(t, url, "acme", 429, set.Add(staleness+slack), "override set").Sub(set)
	t.Logf("the override showed after %v (staleness %v)", took, staleness)

	back := until(t, url, "acme", 200, expires.Add(slack), "override expired")
	if back.Before(expires) {
		t.Fatalf("admitted at %v, before the override's expiry %v", back, expires)
	}
	t.Logf("the override ended %v after its expiry", back.Sub(expires))
	if got := tenantStatus(t, url, "other"); got != 200 {
		t.Fatalf("a tenant on no plan: %d, want 200", got)
	}
}

// The plans flags are refused where they would not be acted on, a plans
// block without -plans too (at start-up and by -check alike, naming the
// line and the flag), and -check accepts a plans block with -plans
// without connecting to it.
func TestProxyPlansFlagsRefusedWhereUnused(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain.yaml")
	os.WriteFile(plain, []byte("upstream: http://127.0.0.1:1\nlimits: [{name: a, key: ip, rate: 1r/s, algorithm: token_bucket}]\nroutes: [{name: r, match: /, limits: [a]}]\n"), 0o644)
	withPlans := filepath.Join(dir, "plans.yaml")
	os.WriteFile(withPlans, []byte("upstream: http://127.0.0.1:1\nplans: {tenant_header: X-Tenant}\nlimits: [{name: a, key: ip, rate: 1r/s, algorithm: token_bucket}]\nroutes: [{name: r, match: /, limits: [a]}]\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-config", plain, "-plans-staleness", "2s"}, 2, "-plans-staleness needs -plans"},
		{[]string{"-config", plain, "-plans", "redis://127.0.0.1:1"}, 2, "PostgreSQL URL"},
		{[]string{"-config", plain, "-plans", "postgres://127.0.0.1:1/x"}, 2, "has no plans block"},
		{[]string{"-config", withPlans, "-plans", "postgres://127.0.0.1:1/x", "-plans-staleness", "0s"}, 2, "must be positive"},
		{[]string{"-config", withPlans}, 2, "plans.yaml:2: plans: needs -plans"},
		{[]string{"-config", withPlans, "-check"}, 2, "plans.yaml:2: plans: needs -plans"},
		{[]string{"-config", withPlans, "-check", "-plans", "postgres://127.0.0.1:1/x"}, 0, ""},
	} {
		var out, errb bytes.Buffer
		args := append([]string{"-listen", "127.0.0.1:0", "-admin-addr", ""}, c.args...)
		code := runProxy(context.Background(), args, &out, &errb)
		if code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}
