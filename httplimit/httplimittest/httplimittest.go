// Package httplimittest holds what the tests of httplimit and of the proxy
// built on it (package gateway) share: an observer that records decisions
// and the scenario their plans tests run against PostgreSQL, with the
// tenant's requests it sends. It imports
// neither face, so each face's tests use it with their own types.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package httplimittest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clocktest"
)

// Recorder is an observer that keeps every decision it is handed, in
// order: a *Recorder[httplimit.Decision] is an httplimit.Observer, and so
// a gateway's. Its zero value is empty and ready to use; it is safe for
// concurrent use.
type Recorder[D any] struct {
	mu sync.Mutex
	ds []D
}

// Observe appends d.
func (r *Recorder[D]) Observe(d D) {
	r.mu.Lock()
	r.ds = append(r.ds, d)
	r.mu.Unlock()
}

// Decisions returns a copy of the decisions observed so far, in order.
func (r *Recorder[D]) Decisions() []D {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ds)
}

// PlanStore is what the plans scenario changes: the methods of
// pgstore.PlanStore it calls.
type PlanStore interface {
	SetPlan(ctx context.Context, name string, limits []byte) error
	AssignPlan(ctx context.Context, tenant, plan string) error
	SetOverride(ctx context.Context, tenant, name string, limit []byte, expires time.Time) error
}

// PlansScenario is the story the plans tests of both faces tell: a limit
// of 2 a minute (a fixed window keyed by the tenant) whose tenants' plans
// and overrides a plans cache of Staleness on Clock reads from a
// PlanStore. The zero value is not usable; see NewPlansScenario.
type PlansScenario struct {
	// Base is a minute boundary (now, truncated): PostgreSQL keeps
	// microseconds, so the times the scenario writes are real ones.
	Base time.Time
	// Clock starts 10 s into Base's minute, so that the staleness stays in
	// the first minute's window. The limiter and the cache must read it.
	Clock *clocktest.Clock
	// Staleness is the cache's (2 s).
	Staleness time.Duration
}

// NewPlansScenario returns the scenario at its start.
func NewPlansScenario() PlansScenario {
	base := time.Now().UTC().Truncate(time.Minute)
	return PlansScenario{Base: base, Clock: clocktest.At(base.Add(10 * time.Second)), Staleness: 2 * time.Second}
}

// Run tells the story through h, a handler limited by tenant header
// X-Tenant, with plans written to store for the limit named limit: tenant
// acme's override takes effect at the cache's staleness (not a nanosecond
// before) and ends exactly at its expiry, its plan then applies, a tenant
// on no plan keeps the limit's 2, and so does acme once its plan is taken
// away. Every window the scenario counts in is a fresh one but the first.
func (s PlansScenario) Run(t testing.TB, store PlanStore, limit string, h http.Handler) {
	t.Helper()
	ctx := context.Background()
	admits := func(when, tenant string, want int) {
		t.Helper()
		if got := Admitted(h, tenant, 10); got != want {
			t.Fatalf("%s: %d admitted, want %d", when, got, want)
		}
	}
	admits("no plan (the limit's)", "acme", 2)
	read := s.Clock.Now() // the cache read acme's record now
	expires := s.Base.Add(10 * time.Minute)
	must(t, store.SetPlan(ctx, "pro", fmt.Appendf(nil, `{%q: {"rate": 5, "period": "1m"}}`, limit)))
	must(t, store.AssignPlan(ctx, "acme", "pro"))
	must(t, store.SetOverride(ctx, "acme", limit, []byte(`{"rate": 7, "period": "1m"}`), expires))
	s.Clock.Set(read.Add(s.Staleness - time.Nanosecond))
	admits("1ns before the staleness (the limit's 2 are spent)", "acme", 0)
	s.Clock.Set(read.Add(s.Staleness))
	admits("at the staleness (the override's 7 less the 2 spent)", "acme", 5)
	s.Clock.Set(s.Base.Add(3 * time.Minute))
	admits("the override", "acme", 7)
	s.Clock.Set(expires.Add(-time.Nanosecond)) // minute 9's window
	admits("1ns before expiry (the override's)", "acme", 7)
	s.Clock.Set(expires) // minute 10's window
	admits("at expiry (the plan's)", "acme", 5)
	admits("a tenant on no plan (the limit's)", "other", 2)
	must(t, store.AssignPlan(ctx, "acme", ""))
	s.Clock.Set(expires.Add(time.Minute)) // past the staleness
	admits("off its plan (the limit's)", "acme", 2)
}

// Admitted sends h n GET requests of tenant (its X-Tenant header) and
// returns how many h answered 200.
func Admitted(h http.Handler, tenant string, n int) int {
	ok := 0
	for range n {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Tenant", tenant)
		if h.ServeHTTP(w, r); w.Code == http.StatusOK {
			ok++
		}
	}
	return ok
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
