package gateway

import (
	"go.yaml.in/yaml/v3"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// countAndPenalty reads a limit's count_responses (statuses and classes
// such as 401, 403, 404, 5xx: the limit then counts those responses, not
// requests) and penalty (a penalty box: a key that breaks the limit is
// refused for that long).
func (p *fileParser) countAndPenalty(m map[string]*yaml.Node, l *limitSpec) error {
	if err := p.optDuration(m, "penalty", true, &l.penalty); err != nil {
		return err
	}
	if n := m["count_responses"]; n != nil {
		items, err := p.strs(n, "count_responses")
		if err != nil {
			return err
		}
		if l.countOnly, err = httplimit.ParseStatusSet(items...); err != nil || l.countOnly.IsEmpty() {
			return p.errf(n, "count_responses: %v (want statuses such as 401 or classes such as 5xx)", err)
		}
	}
	after := m["count_responses"]
	if after == nil {
		after = m["penalty"]
	}
	if after == nil {
		return nil
	}
	if l.queue != nil {
		return p.errf(after, "count_responses and penalty need an algorithm (a limit without one is NGINX's queue)")
	}
	if m["count_responses"] != nil && !carriesDebt(l.limit.Algorithm) {
		return p.errf(after, "count_responses counts after the response: algorithm %v cannot; use token_bucket, fixed_window or sliding_window", l.limit.Algorithm)
	}
	return nil
}

// costHeader reads a route's cost_from_response_header: the response header
// (or trailer) whose value settles the request's actual cost.
func (p *fileParser) costHeader(n *yaml.Node, l limitSpec) (*httplimit.Settle, error) {
	name, err := p.str(n, "cost_from_response_header")
	if err != nil {
		return nil, err
	}
	if err := keyHeader(name); err != nil {
		return nil, p.errf(n, "cost_from_response_header: %v", err)
	}
	if err := costHeaderName(name); err != nil {
		return nil, p.errf(n, "cost_from_response_header: %v", err)
	}
	switch {
	case l.queue != nil:
		return nil, p.errf(n, "limit %q is a queue: cost_from_response_header needs an algorithm", l.name)
	case !carriesDebt(l.limit.Algorithm):
		return nil, p.errf(n, "limit %q: algorithm %v cannot settle a cost; use token_bucket, fixed_window or sliding_window", l.name, l.limit.Algorithm)
	case !l.countOnly.IsEmpty():
		return nil, p.errf(n, "limit %q counts responses: cost_from_response_header does not go with count_responses", l.name)
	}
	return &httplimit.Settle{Header: name}, nil
}

// carriesDebt reports whether a limit of algorithm a can be charged after
// the response (see sluice.Charger).
func carriesDebt(a sluice.Algorithm) bool {
	return a == sluice.TokenBucket || a == sluice.FixedWindow || a == sluice.SlidingWindow
}
