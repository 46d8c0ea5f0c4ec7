package plans

import (
	"context"
	"log/slog"
	"strings"
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

// known reports whether t is more than the zero Tenant of an unknown
// tenant.
func (t Tenant) known() bool {
	return t.Plan != "" || len(t.Limits) > 0 || len(t.Overrides) > 0
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
	// MaxTenants bounds the tenants the Source knows (a plan or an
	// override) held at once; past it one of them is dropped to make room.
	// Names the Source does not know never take their place (see
	// MaxUnknownTenants). 0 means DefaultMaxTenants.
	MaxTenants int
	// MaxUnknownTenants bounds the names held that the Source does not
	// know (or whose first read failed), kept so that they are read once
	// per Staleness rather than on every lookup; past it one of them is
	// dropped, which costs a read, not a wrong answer. 0 means
	// DefaultMaxUnknownTenants.
	MaxUnknownTenants int
	// MaxReads bounds the Source reads under way at once for names not
	// held as known tenants (tenant names come from requests, so a client
	// can send a new one on every request): a lookup that finds all of
	// them busy reads nothing and has no tenant limit, as for an unknown
	// tenant, and the name is read on a later lookup. The rereads of known
	// tenants, at most one per tenant per Staleness, are not counted, so
	// a flood of names never delays them. 0 means DefaultMaxReads.
	MaxReads int
	// Timeout bounds one read of the Source. 0 means DefaultTimeout.
	Timeout time.Duration
	// Logger receives the Source's errors, at most one line per
	// FailureLogInterval, which counts the failed reads since the line
	// before. nil means slog.Default().
	Logger *slog.Logger
}

// Defaults of Config, and the Cache's interval between lines about a
// failing Source.
const (
	DefaultStaleness  = time.Second
	DefaultMaxTenants = 100_000
	// DefaultMaxUnknownTenants holds names of at most MaxNameLen bytes:
	// about 52 MB of live heap when every name is that long (514 bytes an
	// entry, measured), 62 to 64 MB of heap spans in use, less for
	// shorter names.
	DefaultMaxUnknownTenants = 100_000
	// DefaultMaxReads: a read is one indexed query, about a millisecond,
	// so 8 at once still read thousands of new tenants a second, far more
	// than real tenants first show up, while a flood of names keeps at
	// most 8 queries in flight, about the size of a PostgreSQL pool
	// (pgxpool's default is 4 or the number of CPUs).
	DefaultMaxReads    = 8
	DefaultTimeout     = 250 * time.Millisecond
	FailureLogInterval = 10 * time.Second
)

// Cache answers which limit a tenant has for a name, reading each tenant's
// record from its Source at most once per Staleness, on the lookup that
// finds it stale. Concurrent lookups of a tenant never read share the one
// read; those of a tenant being read again use the record before it rather
// than wait, so a change can take Staleness plus one read's time to show
// (at most Timeout). While the Source fails, the record last read is kept
// (or no record, for a tenant never read: the config's limits apply), and
// read again after Staleness. Names no tenant may have (CheckName) are
// never read, and at most MaxReads names not known are read at once. It is
// safe for concurrent use. The zero Cache is not usable; see NewCache.
type Cache struct {
	src Source
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// known holds tenants the Source knows; unknown the others, and the
	// names being read for the first time.
	known, unknown map[string]*entry
	reading        int       // reads of entries counted in MaxReads
	failures       int       // failed reads since the last line logged
	loggedAt       time.Time // of the last line about failures
	logged         bool      // whether a line about failures was logged
}

// entry is one tenant's record as read at fetched; ready is closed once
// the read that made it ends, and t is not read before.
type entry struct {
	ready   chan struct{}
	t       Tenant
	fetched time.Time
	// prev is the record read before, which lookups use while the read
	// that made this entry is under way, when hasPrev.
	prev    Tenant
	hasPrev bool
	// counted: the read holds one of MaxReads.
	counted bool
	// invalid: Invalidate was called since the read began; the next
	// lookup reads again and waits for that read. c.mu guards it.
	invalid bool
}

// last is the record e holds: its own once its read has ended, else the
// one before (none when there is none). c.mu is held.
func (e *entry) last() Tenant {
	if e.done() {
		return e.t
	}
	return e.prev
}

// done reports whether e's read has ended.
func (e *entry) done() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// SystemClock is sluice.SystemClock, the Clock of the system's time, which
// a nil Clock in Config (and in the admin API's, which checks an override's
// expiry against the same time) stands for.
type SystemClock = sluice.SystemClock

// NewCache returns a Cache over src.
func NewCache(src Source, cfg Config) *Cache {
	if cfg.Staleness <= 0 {
		cfg.Staleness = DefaultStaleness
	}
	cfg.Clock = sluice.ClockOr(cfg.Clock)
	if cfg.MaxTenants <= 0 {
		cfg.MaxTenants = DefaultMaxTenants
	}
	if cfg.MaxUnknownTenants <= 0 {
		cfg.MaxUnknownTenants = DefaultMaxUnknownTenants
	}
	if cfg.MaxReads <= 0 {
		cfg.MaxReads = DefaultMaxReads
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Cache{src: src, cfg: cfg, log: log, known: map[string]*entry{}, unknown: map[string]*entry{}}
}

// Staleness is the cache's bound on staleness.
func (c *Cache) Staleness() time.Duration { return c.cfg.Staleness }

// Limit returns tenant's limit of name: its override that has not expired
// at the cache's now, else its plan's, else ok is false. A tenant no
// tenant may be called (CheckName: empty, over MaxNameLen bytes, a control
// character or invalid UTF-8) has none and costs no read: every face
// (the service, the middleware, the proxy) asks here, so all refuse the
// same names.
func (c *Cache) Limit(ctx context.Context, tenant, name string) (lim sluice.Limit, ok bool) {
	if !validName(tenant) {
		return sluice.Limit{}, false
	}
	t, now := c.tenant(ctx, tenant)
	if o, has := t.Overrides[name]; has && (o.Expires.IsZero() || now.Before(o.Expires)) {
		return o.Limit, true
	}
	lim, ok = t.Limits[name]
	return lim, ok
}

// Invalidate makes the next lookup of tenant ("": of every tenant, as
// after a plan's limits change) read its record, and lookups wait for
// that read: the admin API calls it after a change, which then takes
// effect at once in this process (other processes within Staleness). A
// tenant held stays held meanwhile, so its record stays in force if the
// read fails, and that read is not one of MaxReads (a flood of new names
// cannot leave it without its limit): a known tenant's, and that of a
// name one call names (the admin API's, for the tenant it just changed),
// held as unknown until read if it was not held. Invalidate("") forgets
// the names held as unknown instead: they are read again as new names.
func (c *Cache) Invalidate(tenant string) {
	c.mu.Lock()
	if tenant == "" {
		for _, e := range c.known {
			e.invalid = true
		}
		clear(c.unknown)
	} else {
		if e := c.known[tenant]; e != nil {
			e.invalid = true
		}
		if e := c.unknown[tenant]; e != nil {
			e.invalid = true
		} else if c.known[tenant] == nil && validName(tenant) { // held as unknown until read
			put(c.unknown, strings.Clone(tenant), &entry{ready: closed, invalid: true}, c.cfg.MaxUnknownTenants)
		}
	}
	c.mu.Unlock()
}

// closed is a closed channel: the ready of an entry with no read.
var closed = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// tenant returns tenant's record, reading it when it is older than the
// staleness, and the time of the lookup.
func (c *Cache) tenant(ctx context.Context, tenant string) (Tenant, time.Time) {
	now := c.cfg.Clock.Now()
	c.mu.Lock()
	e, known := c.known[tenant]
	if !known {
		e = c.unknown[tenant]
	}
	if e != nil && !e.invalid {
		select {
		case <-e.ready:
			if now.Sub(e.fetched) < c.cfg.Staleness {
				c.mu.Unlock()
				return e.t, now
			}
		default: // a read is under way: use the record before it, or wait
			c.mu.Unlock()
			if e.hasPrev {
				return e.prev, now
			}
			return c.wait(ctx, e), now
		}
	}
	// Counted: a read of a name not known, unless Invalidate named it.
	next := &entry{ready: make(chan struct{}), fetched: now, counted: !known && (e == nil || !e.invalid)}
	if next.counted {
		if c.reading >= c.cfg.MaxReads { // no read: an unknown tenant's answer
			c.mu.Unlock()
			return Tenant{}, now
		}
		c.reading++
	}
	if e != nil {
		// t kept if the read fails; lookups meanwhile use prev, unless
		// e was invalidated: they wait for the record read after it.
		next.t, next.prev, next.hasPrev = e.last(), e.last(), !e.invalid
	}
	// The tables hold a copy: tenant may be cut from a larger request
	// field, which a held key would keep alive. A map assignment stores
	// its key even over an equal one, so every assignment below uses it.
	tenant = strings.Clone(tenant)
	if known {
		c.known[tenant] = next
	} else {
		put(c.unknown, tenant, next, c.cfg.MaxUnknownTenants)
	}
	c.mu.Unlock()
	c.read(ctx, tenant, next)
	return next.t, now
}

// put sets m[tenant] to e, first dropping an entry not being read to keep
// m within bound (any entry, when all are being read).
func put(m map[string]*entry, tenant string, e *entry, bound int) {
	if _, has := m[tenant]; !has && len(m) >= bound {
		drop := ""
		for name, o := range m {
			drop = name
			if o.done() { // else being read, and lookups may wait for it
				break
			}
		}
		delete(m, drop)
	}
	m[tenant] = e
}

// read fills in e from the Source, files it with the known or the unknown
// tenants, then marks it ready.
func (c *Cache) read(ctx context.Context, tenant string, e *entry) {
	defer close(e.ready)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	defer cancel()
	t, err := c.src.Tenant(rctx, tenant)
	if err == nil {
		e.t = t
	}
	c.mu.Lock()
	if e.counted {
		c.reading--
	}
	if err == nil {
		c.file(tenant, e)
	}
	failures, log := c.failed(err)
	c.mu.Unlock()
	if log {
		c.log.Warn("plans: reading tenants failed; their last known limits apply",
			"failures", failures, "tenant", tenant, "error", err)
	}
}

// file moves e, whose read succeeded, to the table of what it found, if
// it is still held (Invalidate or a full table may have dropped it).
// c.mu is held.
func (c *Cache) file(tenant string, e *entry) {
	if e.t.known() && c.unknown[tenant] == e {
		delete(c.unknown, tenant)
		put(c.known, tenant, e, c.cfg.MaxTenants)
	} else if !e.t.known() && c.known[tenant] == e {
		delete(c.known, tenant)
		put(c.unknown, tenant, e, c.cfg.MaxUnknownTenants)
	}
}

// failed counts a failed read (err not nil), and says whether a line is
// due and the failures it reports: one line per FailureLogInterval. c.mu
// is held.
func (c *Cache) failed(err error) (int, bool) {
	if err == nil {
		return 0, false
	}
	c.failures++
	now := c.cfg.Clock.Now()
	if c.logged && now.Sub(c.loggedAt) < FailureLogInterval {
		return 0, false
	}
	n := c.failures
	c.failures, c.loggedAt, c.logged = 0, now, true
	return n, true
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
