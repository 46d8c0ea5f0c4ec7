package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/pgstore"
)

// PlanStore keeps plans, tenants' plans and overrides (with and without
// an expiry) in the tables of migration 0002, and reads a tenant back as
// written; a missing plan or override is ErrNotFound.
func TestPlanStoreRoundTrip(t *testing.T) {
	st, _ := open(t, nil)
	ps := pgstore.NewPlanStore(st.Pool())
	ctx := context.Background()
	if rec, err := ps.Tenant(ctx, "acme"); err != nil || rec.Plan != "" || rec.Limits != nil || rec.Overrides != nil {
		t.Fatalf("an unknown tenant: %+v %v, want the zero record", rec, err)
	}
	if err := ps.AssignPlan(ctx, "acme", "pro"); !errors.Is(err, pgstore.ErrNotFound) {
		t.Errorf("assigning a missing plan: %v, want ErrNotFound", err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ps.SetPlan(ctx, "pro", []byte(`{"api.tenant":{"rate":5,"period":"1h"}}`)))
	must(ps.SetPlan(ctx, "pro", []byte(`{"api.tenant":{"rate":6,"period":"1h"}}`)))
	must(ps.AssignPlan(ctx, "acme", "pro"))
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	must(ps.SetOverride(ctx, "acme", "api.tenant", []byte(`{"rate":9,"period":"1h"}`), exp))
	must(ps.SetOverride(ctx, "acme", "api.user", []byte(`{"rate":1,"period":"1s"}`), time.Time{}))
	rec, err := ps.Tenant(ctx, "acme")
	must(err)
	if rec.Plan != "pro" || string(rec.Limits) != `{"api.tenant": {"rate": 6, "period": "1h"}}` {
		t.Errorf("plan %q limits %s", rec.Plan, rec.Limits)
	}
	if len(rec.Overrides) != 2 || !rec.Overrides[0].Expires.Equal(exp) || !rec.Overrides[1].Expires.IsZero() ||
		rec.Overrides[0].Name != "api.tenant" || string(rec.Overrides[1].Limit) != `{"rate": 1, "period": "1s"}` {
		t.Errorf("overrides %+v", rec.Overrides)
	}
	must(ps.ClearOverride(ctx, "acme", "api.tenant"))
	if err := ps.ClearOverride(ctx, "acme", "api.tenant"); !errors.Is(err, pgstore.ErrNotFound) {
		t.Errorf("clearing twice: %v, want ErrNotFound", err)
	}
	must(ps.AssignPlan(ctx, "acme", ""))
	if rec, _ := ps.Tenant(ctx, "acme"); rec.Plan != "" || len(rec.Overrides) != 1 {
		t.Errorf("after unassigning: %+v, want no plan and the one override left", rec)
	}
}

// A tenant's read, the one a plans cache makes for every name it has not
// held (a flood of new names included), is one statement: one round trip
// and one snapshot for the plan and the overrides together.
func TestPlanStoreReadsATenantInOneStatement(t *testing.T) {
	ctx := context.Background()
	pool, sent := tracedPool(t)
	if _, err := pgstore.New(ctx, pool, pgstore.Config{}); err != nil {
		t.Fatal(err)
	}
	ps := pgstore.NewPlanStore(pool)
	if err := ps.SetOverride(ctx, "acme", "api.user", []byte(`{"rate":1,"period":"1s"}`), time.Time{}); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"acme", "nobody"} {
		ps.Tenant(ctx, tenant) // prepares what the read needs
		sent.n.Store(0)
		if _, err := ps.Tenant(ctx, tenant); err != nil {
			t.Fatal(err)
		}
		if n := sent.n.Load(); n != 1 {
			t.Errorf("reading %s sent %d statements, want 1", tenant, n)
		}
	}
}
