package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/stores"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/plans"
	"github.com/sluicehq/sluice/service"
)

// adminOptions are serve's admin listener and plans settings.
type adminOptions struct {
	daemon.AdminAuth
	addr      string     // -admin-addr; "" is off
	plans     plansFlags // -plans ("" is off) and -plans-staleness
	tenantKey string
	// keySecretFile (-log-key-secret-file) holds the secret of the keyed
	// hash the live page shows of keys, as the proxy's flag of that name;
	// "": a random secret per process.
	keySecretFile string
}

// flags defines the admin and plans flags on fs.
func (o *adminOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "admin-addr", "", "address of the admin API (peek, reset, plans, overrides, usage, ledger); empty: off. A port alone or :port listens on loopback (127.0.0.1); it needs a token (-admin-token-file or "+daemon.AdminTokenEnv+") or mTLS")
	o.AdminAuth.Flags(fs)
	o.plans.flags(fs, "PostgreSQL URL of plans and per-tenant overrides (the -store URL to share its database); empty: off")
	fs.StringVar(&o.tenantKey, "plans-tenant-key", "tenant", "descriptor entry whose value names the tenant whose plan applies")
	fs.StringVar(&o.keySecretFile, "log-key-secret-file", "", "a file holding the secret (16 bytes at least) of the keyed hash the live page (/page) shows of keys, the same on every replica so that their pages agree (as sluice proxy's flag); default a random secret per process")
}

// check refuses admin settings that would not be acted on, or would
// serve an API nobody can (or everybody could) call.
func (o *adminOptions) check(fs *flag.FlagSet) error {
	if o.addr == "" {
		if err := o.CheckOff(fs); err != nil {
			return err
		}
		if o.keySecretFile != "" {
			return daemon.ExitCode(2, "-log-key-secret-file needs -admin-addr (the live page is off)")
		}
	}
	if err := o.plans.checkFlags(); err != nil {
		return err
	}
	if o.plans.url == "" && envflag.IsSet(fs, "plans-tenant-key") {
		return daemon.ExitCode(2, "-plans-tenant-key needs -plans")
	}
	if o.tenantKey == "" {
		return daemon.ExitCode(2, "-plans-tenant-key must not be empty")
	}
	return o.AdminAuth.Check()
}

// adminParts are what openAdmin opened: the tenant lookup the service
// asks (nil without -plans) and the live page (nil without -admin-addr),
// with the config it shows.
type adminParts struct {
	tenantLimit service.TenantLimitFunc
	page        *page.Page
	keySecret   []byte // of the page's key hashes (-log-key-secret-file)
	loaded      daemon.PageConfig
	svc         atomic.Pointer[service.Service] // for the page's store state
}

// withAdmin adds the plans' tenant lookup and the live page's observer to
// the service's config, and records the start-up config for the page.
func (s *serveApp) withAdmin(c service.Config) service.Config {
	c.TenantLimit = s.admin.tenantLimit
	if s.admin.page != nil {
		c.Observer = s.admin.page
		s.configLoaded(s.rules)
	}
	return c
}

// configLoaded records c as the running config, for the live page.
func (s *serveApp) configLoaded(c *config.Config) {
	if s.admin.page == nil {
		return
	}
	s.admin.loaded.Loaded(c, s.configName())
}

// serviceStarted gives the live page the service: its form asks it, and
// the store's breaker state is its.
func (s *serveApp) serviceStarted(svc *service.Service) {
	if s.admin.page != nil {
		s.admin.svc.Store(svc)
		s.admin.page.SetDecider(svc)
	}
}

// newPage makes the live page of the admin listener.
func (s *serveApp) newPage() *page.Page {
	return page.New(page.Config{
		RawKeys:   s.o.admin.RawKeys,
		KeySecret: s.admin.keySecret,
		Config:    func() page.LoadedConfig { return s.admin.loaded.Running(s.configName()) },
		Store:     s.storeState,
	})
}

// storeState is the store's health for the live page.
func (s *serveApp) storeState() page.StoreState {
	var b *daemon.Breaker
	if f := s.st.Failure; f != nil {
		b = &daemon.Breaker{Mode: f.Mode.String(), Available: true} // until the service starts
		if svc := s.admin.svc.Load(); svc != nil {
			b.Available, b.OpenPartitions = svc.StoreAvailable(), svc.StoreOpenPartitions()
		}
	}
	return daemon.StoreState(stores.Name(s.o.store), s.st.Connected(), b)
}

// openAdmin opens the plans (-plans) and the admin listener
// (-admin-addr), serving the admin API on it.
func (s *serveApp) openAdmin(ctx context.Context, a *daemon.App) error {
	o := &s.o.admin
	if err := o.check(s.fs); err != nil {
		return err
	}
	var pl *pgstore.PlanStore
	var cache *plans.Cache
	if o.plans.url != "" {
		var err error
		pl, cache, err = openPlanCache(ctx, a, o.plans.url, s.o.remote.migrate, o.plans.staleness, s.log)
		if err != nil {
			return err
		}
		s.admin.tenantLimit = service.TenantLimitsBy(cache, o.tenantKey)
		s.log.Info("plans", "store", stores.Name(o.plans.url), "staleness", o.plans.staleness, "tenant_key", o.tenantKey)
	}
	if o.addr == "" {
		return nil
	}
	cfg, err := s.adminConfig(ctx, a, pl, cache)
	if err != nil {
		return err
	}
	if s.admin.keySecret, err = readLogKeySecret(ctx, o.keySecretFile); err != nil {
		return daemon.ExitCode(2, err)
	}
	s.admin.page = s.newPage()
	cfg.Keys, cfg.KeyHash, cfg.SessionPaths = serveKeys{s}, s.admin.page.KeyHash, page.Path
	api := admin.New(cfg)
	s.admin.page.Mount(api)
	return s.serveAdmin(ctx, a, api)
}

// adminConfig builds the admin API's config from serve's parts.
func (s *serveApp) adminConfig(ctx context.Context, a *daemon.App, pl *pgstore.PlanStore, cache *plans.Cache) (admin.Config, error) {
	o := &s.o.admin
	cfg, ok, err := o.APIAuth(ctx)
	if err != nil {
		return admin.Config{}, err
	}
	if !ok {
		return admin.Config{}, daemon.ExitCode(2, "-admin-addr needs a token (-admin-token-file or "+daemon.AdminTokenEnv+") or -admin-client-ca")
	}
	cfg.Limiter, cfg.Logger = s.st.Limiter, s.log.With("log", "audit")
	cfg.ValidateLimit = s.o.validator() // a plan the store cannot serve is refused when written
	if pl != nil {
		cfg.Plans, cfg.Changed = planWriter{pl}, cache.Invalidate
	}
	if stores.Is(s.o.store, stores.Postgres) {
		// A pool of its own: the store in use may be wrapped (reservations).
		st, err := stores.ConnectPostgres(ctx, s.o.store, false)
		if err != nil {
			return admin.Config{}, err
		}
		a.OnClose(func() { st.Close() })
		cfg.Usage = usageSource{st}
	}
	return cfg, nil
}

// serveAdmin listens on -admin-addr (with TLS when set) and serves api.
func (s *serveApp) serveAdmin(ctx context.Context, a *daemon.App, api *admin.API) error {
	o := &s.o.admin
	ln, err := a.Listen(daemon.AdminAddr(o.addr))
	if err != nil {
		return daemon.ExitCode(1, "admin:", err)
	}
	// The public HTTP listener's header, read, write and idle timeouts
	// (the one place serve's HTTP servers are made), a write timeout long
	// enough for a call's own (the export and the page's stream extend
	// theirs), and serveAdminOn's connection cap.
	hs := s.o.listen.HTTPServer(api, s.log)
	hs.WriteTimeout = max(hs.WriteTimeout, admin.DefaultTimeout+5*time.Second)
	scheme, err := o.ServeAdminOn(ctx, a, ln, hs, s.admin.page)
	if err != nil {
		return err
	}
	base := scheme + "://" + daemon.LocalAddr(ln.Addr())
	s.log.Info("admin API", "url", base, "mtls", o.CAFile != "", "page", base+page.Path)
	if o.NoLoginLink {
		s.log.Info("live page login link not printed (-admin-login-link=false): sluice admin login prints one")
	} else {
		logLoginLink(s.log, api, base)
	}
	return nil
}

// logLoginLink logs a one-time link that opens the live page in a
// browser (admin.API.LoginLink): one use, within admin.LoginLinkTTL.
func logLoginLink(log *slog.Logger, api *admin.API, base string) {
	if link, exp := api.LoginLink(base); link != "" {
		log.Info("live page login link (opens once; sluice admin login prints another)", "login", link, "expires", exp.UTC().Format(time.RFC3339))
	}
}

// serveKeys is serve's admin.KeyResolver: the running service's
// CountedKeys.
type serveKeys struct{ s *serveApp }

// CountedKeys returns the keys the running rules count a descriptor
// under; before the service runs, an error (503).
func (k serveKeys) CountedKeys(ctx context.Context, domain string, es []admin.DescriptorEntry) ([]admin.CountedKey, error) {
	svc := k.s.admin.svc.Load()
	if svc == nil {
		return nil, errors.New("the service is not running yet")
	}
	entries := make([]config.Entry, len(es))
	for i, e := range es {
		entries[i] = config.Entry{Key: e.Key, Value: e.Value}
	}
	ks, err := svc.CountedKeys(ctx, domain, entries)
	switch {
	case errors.Is(err, service.ErrNoRule):
		return nil, fmt.Errorf("%w: %w", admin.ErrNoRule, err)
	case errors.Is(err, service.ErrInvalidRequest):
		return nil, fmt.Errorf("%w: %w", sluice.ErrBadInput, err)
	case err != nil:
		return nil, err
	}
	out := make([]admin.CountedKey, len(ks))
	for i, c := range ks {
		out[i] = admin.CountedKey{Rule: c.Rule, Key: c.Key, Limit: c.Limit}
	}
	return out, nil
}

// planWriter is an admin.PlanWriter over a PlanStore: pgstore's
// ErrNotFound becomes admin's.
type planWriter struct{ p *pgstore.PlanStore }

func notFound(err error) error {
	if errors.Is(err, pgstore.ErrNotFound) {
		return fmt.Errorf("%w: %w", admin.ErrNotFound, err)
	}
	return err
}

// SetPlan creates or replaces the plan name with limits.
func (w planWriter) SetPlan(ctx context.Context, name string, limits []byte) error {
	return w.p.SetPlan(ctx, name, limits)
}

// AssignPlan gives tenant the plan; an unknown plan is admin.ErrNotFound.
func (w planWriter) AssignPlan(ctx context.Context, tenant, plan string) error {
	return notFound(w.p.AssignPlan(ctx, tenant, plan))
}

// SetOverride creates or replaces tenant's override of name until expires.
func (w planWriter) SetOverride(ctx context.Context, tenant, name string, limit []byte, expires time.Time) error {
	return w.p.SetOverride(ctx, tenant, name, limit, expires)
}

// ClearOverride removes tenant's override of name; none is
// admin.ErrNotFound.
func (w planWriter) ClearOverride(ctx context.Context, tenant, name string) error {
	return notFound(w.p.ClearOverride(ctx, tenant, name))
}

// usageSource is an admin.UsageSource over pgstore's ledger.
type usageSource struct{ st *pgstore.Store }

func period(p pgstore.Period) admin.Period {
	return admin.Period{Start: p.Start, End: p.End, Count: p.Count, Quota: p.Quota, Updated: p.Updated}
}

// Usage is the ledger's periods of key, as admin.Periods.
func (u usageSource) Usage(ctx context.Context, key string) ([]admin.Period, error) {
	ps, err := u.st.Usage(ctx, key)
	out := make([]admin.Period, len(ps))
	for i, p := range ps {
		out[i] = period(p)
	}
	return out, err
}

// Ledger calls each with every ledger entry between from and to.
func (u usageSource) Ledger(ctx context.Context, from, to time.Time, each func(admin.Entry) error) error {
	return u.st.Ledger(ctx, from, to, func(e pgstore.Entry) error {
		return each(admin.Entry{Key: e.Key, Period: period(e.Period)})
	})
}
