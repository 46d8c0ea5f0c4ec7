package service

import (
	"context"
	"errors"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
)

// peek reads the key of a check-only descriptor (hits_addend 0) without
// spending, when the Limiter is a sluice.Peeker: ok is false when it is
// not, and the descriptor is then answered as before (the limit's capacity,
// no reset). A store failure is handled as a decision's: the rule's failure
// mode answers with Config.Failure; otherwise failsafe's Closed answer
// (sluice.ErrUnavailable) is a denial and any other error fails the call.
func (s *Service) peek(ctx context.Context, domain string, i int, p *plan) (res sluice.Result, ok bool, err error) {
	return s.peekKey(ctx, i, p, s.storeKey(domain, p.entries))
}

// peekKey is peek at the given key.
func (s *Service) peekKey(ctx context.Context, i int, p *plan, key string) (res sluice.Result, ok bool, err error) {
	if s.fb != nil {
		l := s.fb.limiterOf(p)
		res, fellBack, err := l.DecidePeek(ctx, key, p.lim)
		if errors.Is(err, errors.ErrUnsupported) {
			return sluice.Result{}, false, nil
		}
		if fellBack {
			s.m.fallback(p.ctr, p.label, l.Mode())
			if l.Mode() == failsafe.Closed && errors.Is(err, sluice.ErrUnavailable) {
				return sluice.Result{RetryAfter: res.RetryAfter}, true, nil
			}
		}
		return res, true, err
	}
	pk, isPeeker := s.limiter.(sluice.Peeker)
	if !isPeeker {
		return sluice.Result{}, false, nil
	}
	res, err = pk.Peek(ctx, key, p.lim)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		return sluice.Result{}, false, nil
	case err != nil && errors.Is(err, sluice.ErrUnavailable) && ctx.Err() == nil:
		// failsafe's Closed mode: its answer is a denial.
		s.m.storeError(p.ctr, p.label)
		s.logError(i, p, err)
		return sluice.Result{RetryAfter: res.RetryAfter}, true, nil
	}
	return res, true, err
}

// peeked fills in a check-only descriptor's status from its key's state:
// OK with the remaining units and the real reset, or OVER_LIMIT (unless in
// shadow mode) when the key is already over its limit. Like every check,
// it never chooses the response headers.
func (s *Service) peeked(o *outcome, sp *statusParts, res sluice.Result) {
	o.remain = int64(res.Remaining)
	o.st.LimitRemaining = clampUint32(o.remain)
	if res.Allowed {
		o.wait = res.ResetAfter
	} else {
		o.over, o.wait = true, res.RetryAfter
	}
	s.finish(o, sp)
}
