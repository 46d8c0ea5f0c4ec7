package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/pgstore/pgplans"
	"github.com/sluicehq/sluice/plans"
)

// plansFlags are -plans and -plans-staleness, serve's and the proxy's:
// where tenants' plans and overrides are, and how long one is used from
// memory. The zero value is off until flags defines them.
type plansFlags struct {
	url       string
	staleness time.Duration
	fs        *flag.FlagSet // to tell the flags given
}

// flags defines -plans, described by usage, and -plans-staleness on fs.
func (o *plansFlags) flags(fs *flag.FlagSet, usage string) {
	o.fs = fs
	fs.StringVar(&o.url, "plans", "", usage)
	fs.DurationVar(&o.staleness, "plans-staleness", plans.DefaultStaleness, "longest a tenant's plan and overrides are used from memory before they are read again")
}

// checkFlags refuses, with exit status 2, a -plans-staleness without
// -plans, a -plans that is not a PostgreSQL URL (checkPlansURL) and a
// staleness that is not positive.
func (o *plansFlags) checkFlags() error {
	if o.url == "" && envflag.IsSet(o.fs, "plans-staleness") {
		return daemon.ExitCode(2, "-plans-staleness needs -plans")
	}
	if err := checkPlansURL(o.url); err != nil {
		return err
	}
	if o.staleness <= 0 {
		return daemon.ExitCode(2, "-plans-staleness must be positive")
	}
	return nil
}

// checkPlansURL refuses a -plans, serve's or proxy's, that is not a
// PostgreSQL URL (exit status 2); "" (off) passes.
func checkPlansURL(url string) error {
	if url != "" && !stores.Is(url, stores.Postgres) {
		return daemon.ExitCode(2, "-plans must be a PostgreSQL URL (postgres://…)")
	}
	return nil
}

// openPlanCache connects to the plans' database at url (migrating its
// schema only when migrate), closes it when a closes, and returns its plan
// store and the cache that reads tenants through it, each used from memory
// for at most staleness. Serve and proxy open -plans with it.
func openPlanCache(ctx context.Context, a *daemon.App, url string, migrate bool, staleness time.Duration, log *slog.Logger) (*pgstore.PlanStore, *plans.Cache, error) {
	st, err := stores.ConnectPostgres(ctx, url, migrate)
	if err != nil {
		return nil, nil, fmt.Errorf("-plans %s: %w", stores.Name(url), err)
	}
	a.OnClose(func() { st.Close() })
	pl := pgstore.NewPlanStore(st.Pool())
	return pl, plans.NewCache(pgplans.New(pl), plans.Config{Staleness: staleness, Logger: log}), nil
}

// check refuses plans flags the proxy would not act on.
func (o *plansFlags) check(f *gateway.File) error {
	if err := o.checkFlags(); err != nil || o.url == "" {
		return err
	}
	if f.Config.Plans == nil {
		return daemon.ExitCode(2, fmt.Sprintf("-plans: %s has no plans block (plans: {tenant_header: X-Tenant}), so no limit would use it", f.Name))
	}
	return nil
}

// openPlans opens the plans' database (without migrating it: the proxy
// only reads) and the cache the gateway looks tenants up in; nil without
// -plans.
func (p *proxyApp) openPlans(ctx context.Context, a *daemon.App) error {
	o := &p.o.plans
	if err := p.checkPlans(); err != nil || o.url == "" {
		return err
	}
	_, cache, err := openPlanCache(ctx, a, o.url, false, o.staleness, p.log)
	if err != nil {
		return err
	}
	p.plans = cache
	p.log.Info("plans", "store", stores.Name(o.url), "staleness", o.staleness, "tenant_header", p.file.Config.Plans.TenantHeader)
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
