package gateway

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/plans"
)

// Plans gives each request its tenant's limits: the tenant's override of a
// limit until it expires, else its plan's, looked up by the limit's name
// (a limit named per_tenant is the plans' and overrides' "per_tenant")
// through plans.Lookup, as sluice serve looks up a descriptor's. A limit
// the tenant has no limit of, and every limit without an algorithm (a
// queue, whose meter is fixed), keep their own.
type Plans struct {
	// TenantHeader names the request header whose first line is the
	// tenant. Required. Whoever can set it picks the tenant, so it must
	// come from an authenticating proxy in front, which overwrites a
	// client's.
	TenantHeader string
	// Limits looks tenants up: a *plans.Cache, whose staleness bounds how
	// late a change shows. The program sets it; required.
	Limits plans.Limits
}

// check refuses Plans the gateway could not act on.
func (pl *Plans) check() error {
	if pl == nil {
		return nil
	}
	if pl.Limits == nil {
		return errors.New("gateway: plans: no Limits to look tenants up in (sluice proxy -plans)")
	}
	if err := namedHeader(pl.TenantHeader); err != nil {
		return fmt.Errorf("gateway: plans: tenant_header %q: %w", pl.TenantHeader, err)
	}
	return nil
}

// apply gives pol's limits with an algorithm the tenant's limit of their
// name.
func (pl *Plans) apply(pol []httplimit.Policy) {
	if pl == nil {
		return
	}
	tenant := httplimit.TenantHeader(pl.TenantHeader)
	for i := range pol {
		if pol[i].Queue == nil {
			pol[i].TenantLimit = httplimit.PlanLimits(pl.Limits, tenant, pol[i].Name)
		}
	}
}
