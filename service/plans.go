package service

import (
	"context"
	"strings"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/plans"
)

// TenantLimitFunc is Config.TenantLimit: the limit a descriptor of domain
// with entries gets at run time (its tenant's plan or override), and
// whether it has one. It must be fast (it is asked on every decision of a
// matched rule) and safe for concurrent use.
type TenantLimitFunc func(ctx context.Context, domain string, entries []config.Entry) (sluice.Limit, bool)

// TenantLimits is what TenantLimitsBy looks limits up in: package plans'
// Cache.
type TenantLimits interface {
	Limit(ctx context.Context, tenant, name string) (sluice.Limit, bool)
}

// TenantLimitsBy returns a TenantLimitFunc that takes the tenant from the
// descriptor's entry of key entryKey (such as "tenant") and looks up the
// limit named domain.key1.key2… (the descriptor's entry keys, as
// plans.Name spells it) in l through plans.Lookup, as the middleware and
// the proxy look up a request's. A descriptor without that entry has none,
// and so has one whose tenant no tenant may be called (plans.CheckName),
// without asking l.
func TenantLimitsBy(l TenantLimits, entryKey string) TenantLimitFunc {
	return func(ctx context.Context, domain string, entries []config.Entry) (sluice.Limit, bool) {
		tenant := ""
		for _, e := range entries {
			if e.Key == entryKey {
				tenant = e.Value
				break
			}
		}
		if tenant == "" {
			return sluice.Limit{}, false
		}
		var b strings.Builder
		b.WriteString(domain)
		for _, e := range entries {
			b.WriteByte('.')
			b.WriteString(e.Key)
		}
		return plans.Lookup(ctx, l, tenant, b.String())
	}
}

// tenantLimit replaces the limit of a plan whose descriptor matched a rule
// with its tenant's limit, when Config.TenantLimit gives one. A
// descriptor's own limit override (sent by Envoy) wins; unlimited rules
// and rules with a rate_limits list keep theirs.
func (s *Service) tenantLimit(ctx context.Context, domain string, p *plan) {
	if s.tenantFn == nil || p.rule == nil || p.rule.Unlimited || len(p.rule.More) > 0 || p.keyDesc.GetLimit() != nil {
		return
	}
	lim, ok := s.tenantFn(ctx, domain, p.entries)
	if !ok {
		return
	}
	// A plan sets the limit's shape, not what the operator marked billable
	// on the rule it applies to, nor its layout: one key keeps one layout
	// with and without its tenant's plan.
	lim = lim.WithLayoutOf(p.rule.Limit)
	lim.Billable = p.rule.Limit.Billable
	p.lim, p.period, p.info = lim, lim.Period, nil // info's headers are the rule's
	p.rpu = uint32(min(lim.Rate, MaxUnlimited))
	p.unit = pb.RateLimitResponse_RateLimit_UNKNOWN
	if !lim.Calendar.IsZero() {
		p.unit = calendarUnits[lim.Calendar.Unit]
	} else if u, ok := periodUnits[lim.Period]; ok {
		p.unit = u
	}
}

// periodUnits maps a plain window's length to the response's unit.
var periodUnits = map[time.Duration]pb.RateLimitResponse_RateLimit_Unit{
	time.Second:    pb.RateLimitResponse_RateLimit_SECOND,
	time.Minute:    pb.RateLimitResponse_RateLimit_MINUTE,
	time.Hour:      pb.RateLimitResponse_RateLimit_HOUR,
	24 * time.Hour: pb.RateLimitResponse_RateLimit_DAY,
}

// calendarUnits maps a calendar's unit to the response's (a quarter has
// none: UNKNOWN).
var calendarUnits = map[sluice.CalendarUnit]pb.RateLimitResponse_RateLimit_Unit{
	sluice.CalendarDay:   pb.RateLimitResponse_RateLimit_DAY,
	sluice.CalendarWeek:  pb.RateLimitResponse_RateLimit_WEEK,
	sluice.CalendarMonth: pb.RateLimitResponse_RateLimit_MONTH,
	sluice.CalendarYear:  pb.RateLimitResponse_RateLimit_YEAR,
}
