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
// a control character): a tenant's name comes from a request, so a
// hostile one costs no read of the Source. A nil l has no limits.
func Lookup(ctx context.Context, l Limits, tenant, name string) (sluice.Limit, bool) {
	if l == nil || CheckName(tenant) != nil {
		return sluice.Limit{}, false
	}
	return l.Limit(ctx, tenant, name)
}
