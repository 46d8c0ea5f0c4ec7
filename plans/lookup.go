package plans

import (
	"context"

	"github.com/sluicehq/sluice"
)

// Limits is what every face asks for a tenant's limit (the service for a
// descriptor, the middleware and the proxy for a request): a *Cache. It
// must be safe for concurrent use.
type Limits interface {
	Limit(ctx context.Context, tenant, name string) (sluice.Limit, bool)
}

// Lookup returns tenant's limit of name from l (an override that has not
// expired, else its plan's), and false when it has none or when tenant
// could not name one (CheckName refuses it: empty, over MaxNameLen bytes,
// a control character), whatever l: the same names a Cache refuses for
// every face, the service's included. A nil l has no limits.
func Lookup(ctx context.Context, l Limits, tenant, name string) (sluice.Limit, bool) {
	if l == nil || !validName(tenant) {
		return sluice.Limit{}, false
	}
	return l.Limit(ctx, tenant, name)
}
