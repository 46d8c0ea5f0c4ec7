package service

import (
	"strconv"

	corepb "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/sluicehq/sluice/rlheader"
)

// pick returns the outcome the response headers describe: among the
// eligible ones, the over-limit one with the longest wait, else the one
// with the fewest remaining units, ties to the first; nil if none is
// eligible.
func pick(outs []outcome) *outcome {
	var best *outcome
	for i := range outs {
		o := &outs[i]
		if !o.eligible {
			continue
		}
		switch {
		case best == nil:
			best = o
		case o.over != best.over:
			if o.over {
				best = o
			}
		case o.over:
			if o.wait > best.wait {
				best = o
			}
		case o.remain < best.remain:
			best = o
		}
	}
	return best
}

// appendHeaders appends the response headers of Config.Headers to dst.
func (s *Service) appendHeaders(dst []*corepb.HeaderValue, outs []outcome, over bool) []*corepb.HeaderValue {
	o := pick(outs)
	if o == nil {
		return dst
	}
	remain := o.remain
	if o.over {
		remain = 0
	}
	switch s.headers {
	case HeadersDraft11:
		pol := rlheader.Policy{Name: o.p.policy, Quota: int64(o.p.rpu), Window: o.p.period}
		st := rlheader.Status{Name: o.p.policy, Remaining: remain, Reset: o.wait}
		dst = append(dst,
			&corepb.HeaderValue{Key: rlheader.HeaderRateLimitPolicy, Value: string(rlheader.AppendPolicies(nil, pol))},
			&corepb.HeaderValue{Key: rlheader.HeaderRateLimit, Value: string(rlheader.AppendStatuses(nil, st))})
	case HeadersLegacy:
		dst = append(dst,
			&corepb.HeaderValue{Key: s.legacy.Limit, Value: strconv.FormatUint(uint64(o.p.rpu), 10)},
			&corepb.HeaderValue{Key: s.legacy.Remaining, Value: strconv.FormatInt(remain, 10)},
			&corepb.HeaderValue{Key: s.legacy.Reset, Value: rlheader.FormatRetryAfter(o.wait)})
	}
	if over && o.over {
		dst = append(dst, &corepb.HeaderValue{Key: rlheader.HeaderRetryAfter, Value: rlheader.FormatRetryAfter(o.wait)})
	}
	return dst
}
