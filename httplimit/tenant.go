package httplimit

import (
	"fmt"
	"net/http"
	"net/textproto"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/plans"
)

// TenantLimitFunc is Policy.TenantLimit: the limit a request's tenant has
// for the policy (its plan's or its override's), which replaces the
// policy's Limit for that request, and whether it has one. A sliding window
// on a sliding window policy is decided in the policy's layout
// (sluice.Limit.WithLayoutOf), so that one key keeps one layout with and
// without its tenant. It must be fast (it is asked on every request the
// policy decides) and safe for concurrent use.
type TenantLimitFunc func(r *http.Request) (sluice.Limit, bool)

// PlanLimits returns a TenantLimitFunc that names the request's tenant
// with tenant and looks up its limit called name in l through
// plans.Lookup, as the service does for a descriptor: the tenant's
// override of name until it expires, else its plan's limit of name. A
// request without a tenant, or with one no tenant may be called
// (plans.CheckName), keeps the policy's limit and costs no lookup.
func PlanLimits(l plans.Limits, tenant func(*http.Request) string, name string) TenantLimitFunc {
	return func(r *http.Request) (sluice.Limit, bool) {
		return plans.Lookup(r.Context(), l, tenant(r), name)
	}
}

// TenantHeader returns a tenant function for PlanLimits that reads the
// request header name's first line ("" when absent). The header must be
// one the client cannot forge (set by an authenticating proxy in front,
// or checked before this middleware): whoever sets it gets that tenant's
// limits.
func TenantHeader(name string) func(*http.Request) string {
	name = textproto.CanonicalMIMEHeaderKey(name)
	return func(r *http.Request) string {
		if v := r.Header[name]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

// checkTenantLimit refuses a TenantLimit on a queued policy: the queue's
// meter is fixed when the policy is made.
func checkTenantLimit(p *Policy) error {
	if p.TenantLimit != nil && p.Queue != nil {
		return fmt.Errorf("httplimit: policy %q: a TenantLimit cannot change a Queue's limit", p.Name)
	}
	return nil
}

// forTenant returns p with the request's tenant limit in place of its
// Limit, or p itself when there is none or the tenant limit is one p
// cannot use (a debt-carrying policy needs a debt-carrying algorithm; the
// Limiter must accept it): that is logged once, and p's limit applies. A
// limit seen before costs neither a copy of p nor its checks again.
func (m *Middleware) forTenant(r *http.Request, p *compiled) *compiled {
	if p.TenantLimit == nil {
		return p
	}
	lim, ok := p.TenantLimit(r)
	if !ok {
		return p
	}
	if lim = lim.WithLayoutOf(p.Limit); lim == p.Limit {
		return p
	}
	if c := p.tenants.get(lim); c != nil {
		return c
	}
	c := *p
	c.Limit = lim
	if err := m.usableTenantLimit(&c.Policy); err != nil {
		m.cfg.Logger.Warn("httplimit: a tenant limit cannot apply; the policy's does", "policy", p.Name, "error", err)
		p.tenants.put(lim, p) // checked and logged once: p applies for lim
		return p
	}
	c.tenant = true
	c.header.Quota, c.header.Window = int64(lim.Rate), 0
	if lim.Period%time.Second == 0 {
		c.header.Window = lim.Period
	}
	p.tenants.put(lim, &c)
	return &c
}

// maxTenantPolicies bounds the tenant limits a policy keeps made: plans
// and overrides are the operator's, but a store full of distinct
// overrides must not grow the process without bound. Past it, a limit not
// kept is made on each request, as it would be without the cache.
const maxTenantPolicies = 1024

// tenantPolicies keeps the policy made for each tenant limit (forTenant),
// or the policy itself for a limit it cannot use, up to maxTenantPolicies
// of them. Safe for concurrent use.
type tenantPolicies struct {
	mu      sync.RWMutex
	byLimit map[sluice.Limit]*compiled
}

// get returns the policy kept for lim, or nil.
func (t *tenantPolicies) get(lim sluice.Limit) *compiled {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.byLimit[lim]
}

// put keeps c for lim while there is room.
func (t *tenantPolicies) put(lim sluice.Limit, c *compiled) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.byLimit) < maxTenantPolicies {
		t.byLimit[lim] = c
	}
}

// usableTenantLimit checks p's Limit as New checks a policy's.
func (m *Middleware) usableTenantLimit(p *Policy) error {
	if err := p.Limit.Validate(); err != nil {
		return err
	}
	if v, ok := m.cfg.Limiter.(sluice.LimitValidator); ok {
		if err := v.ValidateLimit(p.Limit); err != nil {
			return err
		}
	}
	return checkAfter(m.cfg.Limiter, p)
}

// tenantLimited reports whether a decision was made on a tenant's limit.
func tenantLimited(ds []decision) bool {
	for i := range ds {
		if ds[i].p.tenant {
			return true
		}
	}
	return false
}
