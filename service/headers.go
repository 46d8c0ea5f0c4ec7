package service

import (
	"strconv"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rlheader"
)

// pick returns the outcome the response headers describe: among the
// eligible ones, the one closest to exhaustion by rlheader.Closer (the
// over-limit one with the longest wait, else the one with the fewest
// remaining units), ties to the first; nil if none is eligible.
func pick(outs []outcome) *outcome {
	var best *outcome
	var st rlheader.Standing
	for i := range outs {
		o := &outs[i]
		if !o.eligible {
			continue
		}
		if s := (rlheader.Standing{Over: o.over, Remaining: o.remaining(), Wait: o.wait}); best == nil || rlheader.Closer(s, st) {
			best, st = o, s
		}
	}
	return best
}

// headerPolicy is the RateLimit-Policy item of the plan's limit.
func (p *plan) headerPolicy() rlheader.Policy {
	return rlheader.Policy{Name: p.policy, Quota: int64(p.rpu), Window: p.period}
}

// rulePolicies are the RateLimit-Policy items of every limit of r: one,
// or one per limit of a rate_limits list.
func rulePolicies(r *config.RateLimit) []rlheader.Policy {
	pols := []rlheader.Policy{{Name: policyName(r), Quota: int64(r.RequestsPerUnit), Window: r.Period()}}
	for j, m := range r.More {
		pols = append(pols, rlheader.Policy{Name: listPolicyName(m, j+1), Quota: int64(m.RequestsPerUnit), Window: m.Period()})
	}
	return pols
}

// remaining is the remaining quota the response headers report: none when
// over the limit.
func (o *outcome) remaining() int64 {
	if o.over {
		return 0
	}
	return o.remain
}

// responseHeaders returns the response headers of Config.Headers, nil
// when no outcome may choose them.
func (s *Service) responseHeaders(outs []outcome, over bool) []*corepb.HeaderValue {
	o := pick(outs)
	if o == nil {
		return nil
	}
	remain := o.remaining()
	h := new(headerBlock)
	switch s.headers {
	case HeadersDraft11:
		policy, status := "", o.p.policy
		if s.names != PolicyNamesRule {
			// Renamed per response: PolicyNamesIndex names by position.
			var pols []rlheader.Policy
			if r := o.p.rule; r != nil && len(r.More) > 0 {
				pols = rulePolicies(r)
			} else {
				pols = []rlheader.Policy{o.p.headerPolicy()}
			}
			status = s.renamePolicies(pols, status)
			policy = string(rlheader.AppendPolicies(nil, pols...))
		} else if o.p.info != nil {
			policy = o.p.info.policyHeader
		} else if r := o.p.rule; r != nil && len(r.More) > 0 {
			policy = string(rlheader.AppendPolicies(nil, rulePolicies(r)...))
		} else {
			policy = string(rlheader.AppendPolicies(nil, o.p.headerPolicy()))
		}
		var buf [96]byte
		st := rlheader.Status{Name: status, Remaining: remain, Reset: o.wait}
		h.add(rlheader.HeaderRateLimitPolicy, policy)
		h.add(rlheader.HeaderRateLimit, string(rlheader.AppendStatuses(buf[:0], st)))
	case HeadersLegacy:
		limit := ""
		if o.p.info != nil {
			limit = o.p.info.limitHeader
		} else {
			limit = strconv.FormatUint(uint64(o.p.rpu), 10)
		}
		h.add(s.legacy.Limit, limit)
		h.add(s.legacy.Remaining, strconv.FormatInt(remain, 10))
		h.add(s.legacy.Reset, rlheader.FormatRetryAfter(o.wait))
	}
	if over && o.over {
		h.add(rlheader.HeaderRetryAfter, rlheader.FormatRetryAfter(o.wait))
	}
	return h.list()
}
