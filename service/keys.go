package service

import (
	"context"
	"errors"
	"fmt"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// CountedKey is a store key a descriptor is counted under, with the limit
// it is counted against: what an operator peeks or resets.
type CountedKey struct {
	// Rule names the limit: the rule's name, else its FullKey (with
	// "#<seconds>s" for the second and later limits of a rate_limits
	// list), as the response headers name it.
	Rule string
	// Key is the store key (StoreKey or EnvoyStoreKey, with the prefix).
	Key string
	// Limit is the limit the key is counted against: the rule's, or the
	// tenant's limit when Config.TenantLimit gives one.
	Limit sluice.Limit
}

// ErrNoRule is wrapped by CountedKeys' error for a descriptor that no rule
// of the running config counts: none matches, or the one that matches is
// unlimited or blocks every request (so nothing is counted).
var ErrNoRule = errors.New("service: no rule counts this descriptor")

// CountedKeys returns the store keys one descriptor of domain is counted
// under by the running rules, and their limits, as a request that spends
// would be decided (shared rules, rate_limits lists, the store key's
// format and prefix, tenants' plans); the descriptor sends no limit
// override. It asks no store (a tenant's plan may be read through
// Config.TenantLimit's cache). Its error wraps ErrInvalidRequest for a
// malformed descriptor and ErrNoRule when no rule counts it.
func (s *Service) CountedKeys(ctx context.Context, domain string, entries []config.Entry) ([]CountedKey, error) {
	if domain == "" {
		return nil, invalid("empty domain")
	}
	if len(entries) > s.maxEnts {
		return nil, invalid("%d entries, over the maximum of %d", len(entries), s.maxEnts)
	}
	d := &rlpb.RateLimitDescriptor{Entries: make([]*rlpb.RateLimitDescriptor_Entry, len(entries))}
	for i, e := range entries {
		d.Entries[i] = &rlpb.RateLimitDescriptor_Entry{Key: e.Key, Value: e.Value}
	}
	box := s.rules.Load()
	var rules Rules
	if box != nil {
		rules = box.r
	}
	var p plan
	if err := s.planDescriptor(0, d, make([]config.Entry, len(entries)), 1, domain, rules, &p); err != nil {
		return nil, err
	}
	s.resolve(box, domain, &p, false)
	s.tenantLimit(ctx, domain, &p)
	switch r := p.rule; {
	case r == nil:
		return nil, fmt.Errorf("%w: no rule of domain %q matches %s", ErrNoRule, domain, entriesText(p.entries))
	case r.Unlimited:
		return nil, fmt.Errorf("%w: rule %s is unlimited", ErrNoRule, policyName(r))
	case p.rpu == 0:
		return nil, fmt.Errorf("%w: rule %s blocks every request (requests_per_unit 0)", ErrNoRule, policyName(r))
	}
	base := s.storeKey(domain, p.entries)
	if len(p.rule.More) == 0 {
		return []CountedKey{{Rule: p.policy, Key: base, Limit: p.lim}}, nil
	}
	qs := limitPlans(&p)
	out := make([]CountedKey, len(qs))
	for j := range qs {
		out[j] = CountedKey{Rule: qs[j].policy, Key: limitKey(base, qs[j].rule, j), Limit: qs[j].lim}
	}
	return out, nil
}
