package httplimit_test

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/httplimittest"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/pgstore/pgplans"
	"github.com/sluicehq/sluice/plans"
	"github.com/sluicehq/sluice/queue"
)

// planStore opens a PlanStore on a PostgreSQL server of the test's own.
func planStore(t *testing.T) *pgstore.PlanStore {
	t.Helper()
	srv := pgtest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, srv.URL(), pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return pgstore.NewPlanStore(st.Pool())
}

// Through the middleware, a tenant's override set in PostgreSQL takes
// effect at the cache's staleness (not a nanosecond before) and ends
// exactly at its expiry; assigning a plan changes the limit (the story of
// httplimittest.PlansScenario).
func TestPlanLimitsFollowOverridesAndPlansInPostgres(t *testing.T) {
	ps := planStore(t)
	sc := httplimittest.NewPlansScenario()
	cache := plans.NewCache(pgplans.New(ps), plans.Config{Clock: sc.Clock, Staleness: sc.Staleness})
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, sc.Clock)},
		Policies: []httplimit.Policy{{
			Name:        "api",
			Limit:       sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 2, Period: time.Minute},
			Key:         httplimit.Header("X-Tenant"),
			TenantLimit: httplimit.PlanLimits(cache, httplimit.TenantHeader("X-Tenant"), "api"),
		}},
	})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	sc.Run(t, ps, "api", h)
}

// fixedLimits is a plans.Limits that gives every tenant lim.
type fixedLimits struct{ lim sluice.Limit }

func (f fixedLimits) Limit(context.Context, string, string) (sluice.Limit, bool) { return f.lim, true }

// A queued policy's meter is fixed when it is made: a TenantLimit on it is
// refused, not ignored.
func TestTenantLimitOnAQueueIsRefused(t *testing.T) {
	_, err := httplimit.New(httplimit.Config{
		Settings: httplimit.Settings{Limiter: memstore.New(memstore.Config{})},
		Policies: []httplimit.Policy{{Name: "q", Queue: &queue.Config{Rate: 1, Period: time.Second}, Key: httplimit.Global(),
			TenantLimit: httplimit.PlanLimits(fixedLimits{}, httplimit.TenantHeader("X-Tenant"), "q")}},
	})
	if err == nil || !strings.Contains(err.Error(), "TenantLimit") {
		t.Fatalf("New = %v, want an error naming TenantLimit", err)
	}
}

// RateLimit-Policy shows the quota a request was decided on: its
// tenant's, not the policy's.
func TestTenantLimitShowsInRateLimitPolicy(t *testing.T) {
	h := tenantHandler(t, sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 9, Period: time.Hour}, httplimit.Policy{})
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Tenant", "acme")
	h.ServeHTTP(w, r)
	if got, want := w.Header().Get("RateLimit-Policy"), `"api";q=9;w=3600`; got != want {
		t.Fatalf("RateLimit-Policy = %q, want %q", got, want)
	}
	w = httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if got, want := w.Header().Get("RateLimit-Policy"), `"api";q=2;w=60`; got != want {
		t.Fatalf("without a tenant: RateLimit-Policy = %q, want %q", got, want)
	}
}

// A tenant limit the policy cannot use (a counted-responses policy needs a
// window or a token bucket) is not applied: the policy's limit is.
func TestUnusableTenantLimitKeepsThePolicys(t *testing.T) {
	ok, err := httplimit.ParseStatusSet("200")
	if err != nil {
		t.Fatal(err)
	}
	h := tenantHandler(t, sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: 9, Period: time.Hour, Burst: 9},
		httplimit.Policy{CountOnly: ok})
	if got := httplimittest.Admitted(h, "acme", 10); got != 2 {
		t.Fatalf("%d admitted, want the policy's 2", got)
	}
}

// A tenant limit the policy cannot use is logged once, not on each of the
// tenant's requests: a request of the tenant then costs no check and no
// log line.
func TestUnusableTenantLimitIsLoggedOnce(t *testing.T) {
	ok, err := httplimit.ParseStatusSet("200")
	if err != nil {
		t.Fatal(err)
	}
	var logs testlog.Buffer
	h := loggedTenantHandler(t, slog.New(slog.NewTextHandler(&logs, nil)),
		sluice.Limit{Algorithm: sluice.LeakyBucket, Rate: 9, Period: time.Hour, Burst: 9}, httplimit.Policy{CountOnly: ok})
	httplimittest.Admitted(h, "acme", 10)
	if n := strings.Count(logs.String(), "a tenant limit cannot apply"); n != 1 {
		t.Fatalf("the unusable tenant limit was logged %d times over 10 requests, want once:\n%s", n, logs.String())
	}
}

// tenantHandler is a middleware of one policy "api" (2 a minute, keyed by
// nothing, with p's settings) whose every tenant has lim.
func tenantHandler(t *testing.T, lim sluice.Limit, p httplimit.Policy) http.Handler {
	t.Helper()
	return loggedTenantHandler(t, quiet, lim, p)
}

// loggedTenantHandler is tenantHandler logging to logger.
func loggedTenantHandler(t *testing.T, logger *slog.Logger, lim sluice.Limit, p httplimit.Policy) http.Handler {
	t.Helper()
	p.Name, p.Key = "api", httplimit.Global()
	p.Limit = sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 2, Period: time.Minute}
	p.TenantLimit = httplimit.PlanLimits(fixedLimits{lim}, httplimit.TenantHeader("X-Tenant"), "api")
	m, err := httplimit.New(httplimit.Config{Settings: httplimit.Settings{Logger: logger, Limiter: memstore.New(memstore.Config{})}, Policies: []httplimit.Policy{p}})
	if err != nil {
		t.Fatal(err)
	}
	return m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
}

// BenchmarkTenantLimit is a request through one policy whose tenant has a
// limit of its own (looked up in a plans.Cache), next to one without.
func BenchmarkTenantLimit(b *testing.B) {
	src := staticSource{plans.Tenant{Limits: map[string]sluice.Limit{"api": {Algorithm: sluice.TokenBucket, Rate: 1 << 29, Period: time.Hour, Burst: 1 << 29}}}}
	cache := plans.NewCache(src, plans.Config{})
	for _, c := range []struct {
		name   string
		tenant httplimit.TenantLimitFunc
	}{{"policy", nil}, {"tenant", httplimit.PlanLimits(cache, httplimit.TenantHeader("X-Tenant"), "api")}} {
		b.Run(c.name, func(b *testing.B) {
			mem := memstore.New(memstore.Config{})
			defer mem.Close()
			m, err := httplimit.New(httplimit.Config{Settings: httplimit.Settings{Logger: quiet, Limiter: mem}, Policies: []httplimit.Policy{{
				Name: "api", Key: httplimit.Global(), TenantLimit: c.tenant,
				Limit: sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1 << 30, Period: time.Hour, Burst: 1 << 30},
			}}})
			if err != nil {
				b.Fatal(err)
			}
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("X-Tenant", "acme")
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				clear(w.Header())
				h.ServeHTTP(w, r)
			}
		})
	}
}

// staticSource is a plans.Source whose every tenant is t.
type staticSource struct{ t plans.Tenant }

func (s staticSource) Tenant(context.Context, string) (plans.Tenant, error) { return s.t, nil }

// tenantSource is a plans.Source whose tenants each have their own limit
// of "api"; an unknown tenant has none.
type tenantSource map[string]sluice.Limit

func (s tenantSource) Tenant(_ context.Context, name string) (plans.Tenant, error) {
	lim, ok := s[name]
	if !ok {
		return plans.Tenant{}, nil
	}
	return plans.Tenant{Limits: map[string]sluice.Limit{"api": lim}}, nil
}

// Tenants of different limits interleaved, each decided many times, each
// keep their own limit: a tenant limit made once and reused for the next
// requests is never another tenant's.
func TestInterleavedTenantsKeepTheirOwnLimits(t *testing.T) {
	win := func(rate int) sluice.Limit {
		return sluice.Limit{Algorithm: sluice.FixedWindow, Rate: rate, Period: time.Minute}
	}
	clk := clocktest.At(time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)) // one window throughout
	cache := plans.NewCache(tenantSource{"a": win(3), "b": win(5)}, plans.Config{Clock: clk})
	m, err := httplimit.New(httplimit.Config{Settings: httplimit.Settings{Logger: quiet, Limiter: memstore.New(memstore.Config{Clock: clk})}, Policies: []httplimit.Policy{{
		Name: "api", Limit: win(2), Key: httplimit.Header("X-Tenant"),
		TenantLimit: httplimit.PlanLimits(cache, httplimit.TenantHeader("X-Tenant"), "api"),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	got := map[string]int{}
	for range 10 {
		for _, tenant := range []string{"a", "b", "c"} {
			got[tenant] += httplimittest.Admitted(h, tenant, 1)
		}
	}
	if want := map[string]int{"a": 3, "b": 5, "c": 2}; !maps.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}

// A tenant's plan on a policy whose sliding window sets its layout (one
// bucket, the two-window counter) is decided in the policy's layout: a
// client at the limit, 10 a minute, one request every 6 s, its requests
// by turns with and without its tenant (so under the plan and under the
// policy), keeps being admitted, as under one limit alone; and one at
// twice the limit is admitted no more than the limit. In two layouts by
// turns, each seeding the other, it was refused nearly always.
func TestTenantLimitKeepsThePolicysLayout(t *testing.T) {
	plan, err := plans.ParseLimit([]byte(`{"algorithm": "sliding_window", "rate": 10, "period": "1m"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, pace := range []struct {
		step time.Duration
		n    int
	}{{6 * time.Second, 200}, {3 * time.Second, 400}} {
		clock := clocktest.At(time.Unix(1_700_000_000, 0))
		m := mustNew(t, httplimit.Config{
			Settings: httplimit.Settings{Limiter: newStore(t, clock)},
			Policies: []httplimit.Policy{{
				Name:        "api",
				Limit:       sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 1},
				Key:         httplimit.Global(),
				TenantLimit: httplimit.PlanLimits(fixedLimits{plan}, httplimit.TenantHeader("X-Tenant"), "api"),
			}},
		})
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		admitted := 0
		for i := range pace.n {
			clock.Advance(pace.step)
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if i%2 == 1 {
				r.Header.Set("X-Tenant", "acme")
			}
			h.ServeHTTP(w, r)
			if w.Code == http.StatusOK {
				admitted++
			}
		}
		minutes := int(time.Duration(pace.n) * pace.step / time.Minute)
		if most := 10 * (minutes + 1); admitted > most {
			t.Errorf("a request every %v: admitted %d of %d, over the limit's %d", pace.step, admitted, pace.n, most)
		}
		if least := 10 * minutes * 8 / 10; admitted < least {
			t.Errorf("a request every %v: admitted %d of %d by turns with a plan; want at least %d", pace.step, admitted, pace.n, least)
		}
		t.Logf("a request every %v: admitted %d of %d", pace.step, admitted, pace.n)
	}
}
