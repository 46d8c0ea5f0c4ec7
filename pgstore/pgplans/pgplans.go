// Package pgplans reads tenants' plans and overrides from PostgreSQL for
// package plans: a plans.Source over pgstore's PlanStore.
//
// It belongs to the wiring layer (docs/architecture.md): pgstore is a store
// and plans a wrapper, and neither may import the other, so the one adapter
// between them lives here, where sluice serve, sluice proxy and their tests
// share it.
package pgplans

import (
	"context"

	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/plans"
)

// Source is a plans.Source over a pgstore.PlanStore: each Tenant call is one
// PlanStore.Tenant read, decoded and checked by plans.DecodeTenant. It is
// safe for concurrent use. The zero Source is not usable (see New).
type Source struct {
	store *pgstore.PlanStore
}

// New returns a Source that reads store.
func New(store *pgstore.PlanStore) Source { return Source{store: store} }

// Tenant reads tenant's plan and overrides (at most
// pgstore.MaxOverridesPerTenant) and decodes them. An unknown tenant is the
// zero plans.Tenant; a read that fails returns PlanStore's error, and a limit
// that is not valid JSON or not a valid Limit returns plans' error.
func (s Source) Tenant(ctx context.Context, tenant string) (plans.Tenant, error) {
	rec, err := s.store.Tenant(ctx, tenant)
	if err != nil {
		return plans.Tenant{}, err
	}
	raw := make([]plans.RawOverride, len(rec.Overrides))
	for i, o := range rec.Overrides {
		raw[i] = plans.RawOverride{Name: o.Name, Limit: o.Limit, Expires: o.Expires}
	}
	return plans.DecodeTenant(rec.Plan, rec.Limits, raw)
}
