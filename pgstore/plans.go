package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound is wrapped by PlanStore's errors for a plan, tenant or
// override that does not exist.
var ErrNotFound = errors.New("pgstore: not found")

// MaxOverridesPerTenant bounds the overrides PlanStore.Tenant reads of one
// tenant.
const MaxOverridesPerTenant = 1024

// PlanStore keeps plans, tenants' plans and per-tenant overrides in the
// tables of migration 0002 (Migrate applies it). Limits are JSON objects
// that it stores and returns as they are (package plans defines and checks
// them). It is safe for concurrent use; the zero PlanStore is not usable
// (see NewPlanStore).
type PlanStore struct {
	pool *pgxpool.Pool
}

// NewPlanStore returns a PlanStore on pool, whose schema Migrate must have
// brought up to date.
func NewPlanStore(pool *pgxpool.Pool) *PlanStore { return &PlanStore{pool: pool} }

// TenantRecord is what the database holds of one tenant.
type TenantRecord struct {
	// Plan is the tenant's plan, "" for none; Limits that plan's limits
	// (a JSON object), nil for none.
	Plan   string
	Limits []byte
	// Overrides are the tenant's overrides, expired ones included, at most
	// MaxOverridesPerTenant (by name).
	Overrides []OverrideRecord
}

// OverrideRecord is one override: a limit (a JSON object) for a name until
// Expires (the zero time: never).
type OverrideRecord struct {
	Name    string
	Limit   []byte
	Expires time.Time
}

// SetPlan creates or replaces the plan name with limits, a JSON object.
func (p *PlanStore) SetPlan(ctx context.Context, name string, limits []byte) error {
	_, err := p.pool.Exec(ctx, `INSERT INTO sluice_plans (name, limits) VALUES ($1, $2)
ON CONFLICT (name) DO UPDATE SET limits = excluded.limits, updated_at = now()`, name, string(limits))
	return wrapErr("set plan", err)
}

// AssignPlan puts tenant on plan; "" takes it off any plan. An unknown
// plan is an error wrapping ErrNotFound.
func (p *PlanStore) AssignPlan(ctx context.Context, tenant, plan string) error {
	if plan == "" {
		_, err := p.pool.Exec(ctx, `DELETE FROM sluice_tenants WHERE tenant = $1`, tenant)
		return wrapErr("unassign plan", err)
	}
	tag, err := p.pool.Exec(ctx, `INSERT INTO sluice_tenants (tenant, plan)
SELECT $1, name FROM sluice_plans WHERE name = $2
ON CONFLICT (tenant) DO UPDATE SET plan = excluded.plan, updated_at = now()`, tenant, plan)
	if err != nil {
		return wrapErr("assign plan", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: plan %q: %w", plan, ErrNotFound)
	}
	return nil
}

// SetOverride creates or replaces tenant's override of name with limit (a
// JSON object) until expires (the zero time: never).
func (p *PlanStore) SetOverride(ctx context.Context, tenant, name string, limit []byte, expires time.Time) error {
	var exp *time.Time
	if !expires.IsZero() {
		exp = &expires
	}
	_, err := p.pool.Exec(ctx, `INSERT INTO sluice_overrides (tenant, name, lim, expires_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (tenant, name) DO UPDATE SET lim = excluded.lim, expires_at = excluded.expires_at, updated_at = now()`,
		tenant, name, string(limit), exp)
	return wrapErr("set override", err)
}

// ClearOverride deletes tenant's override of name; one that does not exist
// is an error wrapping ErrNotFound.
func (p *PlanStore) ClearOverride(ctx context.Context, tenant, name string) error {
	tag, err := p.pool.Exec(ctx, `DELETE FROM sluice_overrides WHERE tenant = $1 AND name = $2`, tenant, name)
	if err != nil {
		return wrapErr("clear override", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: override %q of tenant %q: %w", name, tenant, ErrNotFound)
	}
	return nil
}

// tenantSQL reads a tenant's plan and its overrides in one statement,
// one snapshot: one row, whether or not the tenant exists.
const tenantSQL = `SELECT t.plan, p.limits::text, o.names, o.lims, o.exps
FROM (SELECT) AS one
LEFT JOIN sluice_tenants t ON t.tenant = $1
LEFT JOIN sluice_plans p ON p.name = t.plan
CROSS JOIN LATERAL (
	SELECT array_agg(name ORDER BY name) AS names, array_agg(lim::text ORDER BY name) AS lims,
		array_agg(expires_at ORDER BY name) AS exps
	FROM (SELECT name, lim, expires_at FROM sluice_overrides WHERE tenant = $1 ORDER BY name LIMIT $2) AS s
) AS o`

// Tenant reads tenant's record in one statement (one round trip, one
// snapshot); an unknown tenant is the zero record.
func (p *PlanStore) Tenant(ctx context.Context, tenant string) (TenantRecord, error) {
	var rec TenantRecord
	var plan, limits *string
	var names, lims []string
	var exps []pgtype.Timestamptz
	err := p.pool.QueryRow(ctx, tenantSQL, tenant, MaxOverridesPerTenant).Scan(&plan, &limits, &names, &lims, &exps)
	if err != nil {
		return rec, wrapErr("read tenant", err)
	}
	if plan != nil {
		rec.Plan = *plan
	}
	if limits != nil {
		rec.Limits = []byte(*limits)
	}
	if len(lims) != len(names) || len(exps) != len(names) {
		return TenantRecord{}, fmt.Errorf("pgstore: read tenant: %d override names, %d limits, %d expiries", len(names), len(lims), len(exps))
	}
	for i, name := range names {
		o := OverrideRecord{Name: name, Limit: []byte(lims[i])}
		if exps[i].Valid {
			o.Expires = exps[i].Time
		}
		rec.Overrides = append(rec.Overrides, o)
	}
	return rec, nil
}

func wrapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}
