package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/plans"
)

// plansFlags are the proxy's -plans and -plans-staleness, of the same
// meaning as serve's: where tenants' plans and overrides are, and how long
// one is used from memory.
type plansFlags struct {
	url       string
	staleness time.Duration
	fs        *flag.FlagSet // to tell the flags given
}

// flags defines -plans and -plans-staleness on fs.
func (o *plansFlags) flags(fs *flag.FlagSet) {
	o.fs = fs
	fs.StringVar(&o.url, "plans", "", "PostgreSQL URL of plans and per-tenant overrides, whose schema sluice serve or sluice migrate made; the config's plans block names the tenant's header; empty: off")
	fs.DurationVar(&o.staleness, "plans-staleness", plans.DefaultStaleness, "longest a tenant's plan and overrides are used from memory before they are read again")
}

// check refuses plans flags the proxy would not act on.
func (o *plansFlags) check(f *gateway.File) error {
	if o.url == "" {
		if isSet(o.fs, "plans-staleness") {
			return exitCode(2, "-plans-staleness needs -plans")
		}
		return nil
	}
	if !isPostgres(o.url) {
		return exitCode(2, "-plans must be a PostgreSQL URL (postgres://…)")
	}
	if o.staleness <= 0 {
		return exitCode(2, "-plans-staleness must be positive")
	}
	if f.Config.Plans == nil {
		return exitCode(2, fmt.Sprintf("-plans: %s has no plans block (plans: {tenant_header: X-Tenant}), so no limit would use it", f.Name))
	}
	return nil
}

// openPlans opens the plans' database (without migrating it: the proxy
// only reads) and the cache the gateway looks tenants up in; nil without
// -plans.
func (p *proxyApp) openPlans(ctx context.Context, a *app) error {
	o := &p.o.plans
	if err := o.check(p.file); err != nil || o.url == "" {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, firstConnect)
	st, err := pgstore.Open(cctx, o.url, pgstore.Config{NoMigrate: true})
	cancel()
	if err != nil {
		return fmt.Errorf("-plans %s: %w", storeName(o.url), err)
	}
	a.onClose(func() { st.Close() })
	p.plans = plans.NewCache(planSource{pgstore.NewPlanStore(st.Pool())}, plans.Config{Staleness: o.staleness, Logger: p.log})
	p.log.Info("plans", "store", storeName(o.url), "staleness", o.staleness, "tenant_header", p.file.Config.Plans.TenantHeader)
	return nil
}

// withPlans is c's plans block with the cache to look tenants up in (a
// block without -plans stays without, and gateway.New refuses it).
func (p *proxyApp) withPlans(c *gateway.Plans) *gateway.Plans {
	if c == nil || p.plans == nil {
		return c
	}
	return &gateway.Plans{TenantHeader: c.TenantHeader, Limits: p.plans}
}

// noPlans is the plans of sluice proxy -check: no tenant has any.
type noPlans struct{}

// Limit has no limit for anyone.
func (noPlans) Limit(context.Context, string, string) (sluice.Limit, bool) {
	return sluice.Limit{}, false
}
