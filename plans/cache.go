package plans

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Tenant is what a Source knows of one tenant. The zero Tenant (an unknown
// tenant) has no plan and no override.
type Tenant struct {
	// Plan is the name of the tenant's plan; "" means none.
	Plan string
	// Limits are the plan's limits by name.
	Limits map[string]sluice.Limit
	// Overrides are the tenant's own limits by name, expired ones included
	// (the Cache compares their expiry with its clock).
	Overrides map[string]Override
}

// Override is one tenant's limit of one name, until Expires (the zero
// time: never).
type Override struct {
	Limit   sluice.Limit
	Expires time.Time
}

// Source reads a tenant's record. An unknown tenant is the zero Tenant and
// a nil error. It must be safe for concurrent use.
type Source interface {
	Tenant(ctx context.Context, tenant string) (Tenant, error)
}

// Config configures a Cache. The zero Config is usable.
type Config struct {
	// Staleness is the longest a tenant's record is used after it was
	// read: a change in the Source takes effect on the lookups that start
	// at least Staleness after it (those that arrive while the record is
	// being read again, within Timeout, still get the one before). 0
	// means DefaultStaleness.
	Staleness time.Duration
	// Clock tells the time of staleness and expiry; nil means
	// SystemClock.
	Clock sluice.Clock
	// MaxTenants bounds the tenants held at once (tenant names come from
	// requests, so from clients); past it a tenant is dropped to make room.
	// 0 means DefaultMaxTenants.
	MaxTenants int
	// Timeout bounds one read of the Source. 0 means DefaultTimeout.
	Timeout time.Duration
	// Logger receives the Source's errors, at most one line per Staleness
	// per tenant. nil means slog.Default().
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultStaleness  = time.Second
	DefaultMaxTenants = 100_000
	DefaultTimeout    = 250 * time.Millisecond
)

// Cache answers which limit a tenant has for a name, reading each tenant's
// record from its Source at most once per Staleness, on the lookup that
// finds it stale. Concurrent lookups of a tenant never read share the one
// read; those of a tenant being read again use the record before it rather
// than wait, so a change can take Staleness plus one read's time to show
// (at most Timeout). While the Source fails, the record last read is kept
// (or no record, for a tenant never read: the config's limits apply), and
// read again after Staleness. It is safe for concurrent use. The zero
// Cache is not usable; see NewCache.
type Cache struct {
	src Source
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	tenants map[string]*entry
}

// entry is one tenant's record as read at fetched; ready is closed once
// the read that made it ends.
type entry struct {
	ready   chan struct{}
	t       Tenant
	fetched time.Time
	// hasPrev: t holds the record read before, which lookups use while
	// the read that made this entry is under way.
	hasPrev bool
}

// SystemClock is the sluice.Clock of the system's time, which a nil Clock in
// Config (and in the admin API's, which checks an override's expiry against
// the same time) stands for. Its zero value is the only value and ready to use.
type SystemClock struct{}

// Now returns time.Now(), with its monotonic reading.
func (SystemClock) Now() time.Time { return time.Now() }

// NewCache returns a Cache over src.
func NewCache(src Source, cfg Config) *Cache {
	if cfg.Staleness <= 0 {
		cfg.Staleness = DefaultStaleness
	}
	if cfg.Clock == nil {
		cfg.Clock = SystemClock{}
	}
	if cfg.MaxTenants <= 0 {
		cfg.MaxTenants = DefaultMaxTenants
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Cache{src: src, cfg: cfg, log: log, tenants: map[string]*entry{}}
}

// Staleness is the cache's bound on staleness.
func (c *Cache) Staleness() time.Duration { return c.cfg.Staleness }

// Limit returns tenant's limit of name: its override that has not expired
// at the cache's now, else its plan's, else ok is false. An empty tenant
// has none.
func (c *Cache) Limit(ctx context.Context, tenant, name string) (lim sluice.Limit, ok bool) {
	if tenant == "" {
		return sluice.Limit{}, false
	}
	t, now := c.tenant(ctx, tenant)
	if o, has := t.Overrides[name]; has && (o.Expires.IsZero() || now.Before(o.Expires)) {
		return o.Limit, true
	}
	lim, ok = t.Limits[name]
	return lim, ok
}

// Invalidate forgets tenant's record ("": every tenant's, as after a
// plan's limits change), so that the next lookup reads it: the admin API
// calls it after a change, which then takes effect at once in this process
// (other processes within Staleness).
func (c *Cache) Invalidate(tenant string) {
	c.mu.Lock()
	if tenant == "" {
		clear(c.tenants)
	} else {
		delete(c.tenants, tenant)
	}
	c.mu.Unlock()
}

// tenant returns tenant's record, reading it when it is older than the
// staleness, and the time of the lookup.
func (c *Cache) tenant(ctx context.Context, tenant string) (Tenant, time.Time) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	e := c.tenants[tenant]
	if e != nil {
		select {
		case <-e.ready:
			if now.Sub(e.fetched) < c.cfg.Staleness {
				c.mu.Unlock()
				return e.t, now
			}
		default: // a read is under way: use the record before it, or wait
			c.mu.Unlock()
			if e.hasPrev {
				return e.t, now
			}
			return c.wait(ctx, e), now
		}
	}
	next := &entry{ready: make(chan struct{}), fetched: now}
	if e != nil {
		next.t, next.hasPrev = e.t, true // kept if the read fails
	} else if len(c.tenants) >= c.cfg.MaxTenants {
		for k := range c.tenants { // drop one to make room
			delete(c.tenants, k)
			break
		}
	}
	c.tenants[tenant] = next
	c.mu.Unlock()
	c.read(ctx, tenant, next)
	return next.t, now
}

// read fills in e from the Source, then marks it ready.
func (c *Cache) read(ctx context.Context, tenant string, e *entry) {
	defer close(e.ready)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	defer cancel()
	t, err := c.src.Tenant(rctx, tenant)
	if err != nil {
		c.log.Warn("plans: reading a tenant failed; its last known limits apply", "tenant", tenant, "error", err)
		return
	}
	e.t = t
}

// wait waits for e's read, or for ctx's end (then e's previous record is
// not known here: no tenant limits).
func (c *Cache) wait(ctx context.Context, e *entry) Tenant {
	select {
	case <-e.ready:
		return e.t
	case <-ctx.Done():
		return Tenant{}
	}
}

// RawOverride is an override as a database holds it: its limit in JSON.
type RawOverride struct {
	Name    string
	Limit   []byte
	Expires time.Time
}

// DecodeTenant builds a Tenant from its plan's name, the plan's limits (a
// JSON object of name to Limit; nil for none) and its overrides, checking
// every limit: a Source over a database that stores JSON calls it.
func DecodeTenant(plan string, limits []byte, overrides []RawOverride) (Tenant, error) {
	t := Tenant{Plan: plan}
	if limits != nil {
		ls, err := ParseLimits(limits)
		if err != nil {
			return Tenant{}, err
		}
		t.Limits = ls
	}
	if len(overrides) > 0 {
		t.Overrides = make(map[string]Override, len(overrides))
	}
	for _, o := range overrides {
		lim, err := ParseLimit(o.Limit)
		if err != nil {
			return Tenant{}, err
		}
		t.Overrides[o.Name] = Override{Limit: lim, Expires: o.Expires}
	}
	return t, nil
}
