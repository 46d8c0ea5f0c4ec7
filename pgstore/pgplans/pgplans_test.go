package pgplans_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/pgstore/pgplans"
	"github.com/sluicehq/sluice/plans"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// planStore opens a PlanStore on a schema of its own of the package's
// PostgreSQL server.
func planStore(t *testing.T) *pgstore.PlanStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, pgtest.Schema(t), pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return pgstore.NewPlanStore(st.Pool())
}

// A tenant with a plan and overrides (one expiring, one not) reads back as
// plans.DecodeTenant decodes the same JSON, and an unknown tenant is the
// zero Tenant.
func TestSourceDecodesATenantAsDecodeTenantDoes(t *testing.T) {
	ps := planStore(t)
	src := pgplans.New(ps)
	ctx := context.Background()
	if got, err := src.Tenant(ctx, "nobody"); err != nil || !reflect.DeepEqual(got, plans.Tenant{}) {
		t.Fatalf("an unknown tenant: %+v %v, want the zero Tenant", got, err)
	}
	const limits = `{"api.tenant":{"rate":6,"period":"1h"},"api.user":{"rate":2,"period":"1s","algorithm":"token_bucket","burst":4}}`
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	overrides := []plans.RawOverride{
		{Name: "api.tenant", Limit: []byte(`{"rate":9,"period":"1h"}`), Expires: exp},
		{Name: "api.user", Limit: []byte(`{"rate":1,"period":"1s"}`)},
	}
	for _, err := range []error{
		ps.SetPlan(ctx, "pro", []byte(limits)),
		ps.AssignPlan(ctx, "acme", "pro"),
		ps.SetOverride(ctx, "acme", overrides[0].Name, overrides[0].Limit, overrides[0].Expires),
		ps.SetOverride(ctx, "acme", overrides[1].Name, overrides[1].Limit, overrides[1].Expires),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	want, err := plans.DecodeTenant("pro", []byte(limits), overrides)
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Tenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got.Plan != want.Plan || !reflect.DeepEqual(got.Limits, want.Limits) || len(got.Overrides) != len(want.Overrides) {
		t.Fatalf("Tenant = %+v, want %+v", got, want)
	}
	for name, w := range want.Overrides {
		if g := got.Overrides[name]; g.Limit != w.Limit || !g.Expires.Equal(w.Expires) {
			t.Errorf("override %s = %+v, want %+v", name, g, w)
		}
	}
}
