package service

// Several limits on one descriptor (a rate_limits list, config.RateLimit's
// More), and giving back what a request spent (Config.StopIncrementWhenOverLimit).

import (
	"context"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rlheader"
)

// limitKey is the store key of the j-th limit of a rule's list: the
// descriptor's key for the first, so that a one-limit list counts where
// rate_limit does, and the key with "#" and the limit's period in seconds
// for the others (a list's periods differ), shortened as StoreKey's are.
func limitKey(base string, r *config.RateLimit, j int) string {
	if j == 0 {
		return base
	}
	var buf [24]byte
	suffix := append(strconv.AppendInt(append(buf[:0], '#'), int64(r.Period()/time.Second), 10), 's')
	return shorten(base + string(suffix))
}

// listPolicyName is the name the j-th limit of a rule's list goes by in
// the response headers: its name, else the rule's FullKey for the first
// and FullKey#<period in seconds>s for the others, as their store keys
// end, so that the limits of a list have distinct names.
func listPolicyName(r *config.RateLimit, j int) string {
	if r.Name != "" || j == 0 {
		return policyName(r)
	}
	return r.FullKey + "#" + strconv.FormatInt(int64(r.Period()/time.Second), 10) + "s"
}

// limitPlans returns a plan per limit of p's rule: p with the limit's
// sluice.Limit, unit, name and failure mode. The first keeps p's cached
// ruleInfo; the others have none (their header values are derived when
// they are reported).
func limitPlans(p *plan) []plan {
	qs := make([]plan, 1+len(p.rule.More))
	for j := range qs {
		lr := p.rule
		if j > 0 {
			lr = p.rule.More[j-1]
		}
		q := *p
		q.rule, q.lim, q.rpu, q.period = lr, lr.Limit, lr.RequestsPerUnit, lr.Period()
		if int(lr.Unit) < len(configUnits) {
			q.unit = configUnits[lr.Unit]
		}
		q.name, q.policy = lr.Name, listPolicyName(lr, j)
		if j > 0 {
			q.info = nil
		}
		qs[j] = q
	}
	return qs
}

// report makes p describe the limit q of its list (in its status and the
// response headers); p keeps its rule, the list's first limit, so that
// what follows the decision (refunds, metadata) sees the whole list.
func report(p, q *plan, sp *statusParts) {
	p.lim, p.rpu, p.unit, p.period, p.name, p.policy, p.info = q.lim, q.rpu, q.unit, q.period, q.name, q.policy, q.info
	sp.lim.Name, sp.lim.RequestsPerUnit, sp.lim.Unit = p.name, p.rpu, p.unit
}

// tighter reports whether a is closer to exhaustion than b, as the
// response headers choose (rlheader.Closer).
func tighter(a, b sluice.Result) bool {
	return rlheader.Closer(standing(a), standing(b))
}

func standing(r sluice.Result) rlheader.Standing {
	if !r.Allowed {
		return rlheader.Standing{Over: true, Wait: r.RetryAfter}
	}
	return rlheader.Standing{Remaining: int64(r.Remaining), Wait: r.ResetAfter}
}

// decideAll answers a descriptor whose rule has several limits: a check
// reads them all and reports the tightest; a refund gives back to each;
// otherwise each limit spends in turn, and the first that refuses makes
// the descriptor OVER_LIMIT, after what the limits before it spent is
// refunded, so that a request is charged on all of them or none. The
// status and headers describe the limit that refused, or when all admit
// the tightest of them.
func (s *Service) decideAll(ctx context.Context, domain string, i int, p *plan, sp *statusParts, o *outcome) error {
	p.key = s.storeKey(domain, p.entries)
	base := p.key
	qs := limitPlans(p)
	if p.check {
		return s.checkAll(ctx, domain, i, p, sp, o, qs, base)
	}
	o.eligible = !p.shadow
	best := -1
	var bestRes sluice.Result
	for j := range qs {
		q := &qs[j]
		var res sluice.Result
		if c := q.lim.Capacity(); c >= 1 && q.cost > uint64(c) {
			res = sluice.Result{RetryAfter: q.period} // never admitted
		} else {
			var err error
			if res, err = s.spend(ctx, i, q, limitKey(base, q.rule, j)); err != nil {
				s.refundLimits(ctx, i, qs[:j], base)
				return err
			}
		}
		if !res.Allowed {
			s.refundLimits(ctx, i, qs[:j], base)
			best, bestRes = s.longestRefusal(ctx, i, qs, base, j, res)
			break
		}
		if best < 0 || tighter(res, bestRes) {
			best, bestRes = j, res
		}
	}
	report(p, &qs[best], sp)
	s.decided(o, sp, bestRes)
	return nil
}

// longestRefusal returns the limit whose refusal the status reports: the
// j-th limit, which refused with res, unless a limit after it, read
// without spending, would refuse the cost too for longer. Retry-After
// then says when every limit admits, not just the first that refused. A
// limit that cannot be read is passed over.
func (s *Service) longestRefusal(ctx context.Context, i int, qs []plan, base string, j int, res sluice.Result) (int, sluice.Result) {
	best := j
	for k := j + 1; k < len(qs); k++ {
		q := &qs[k]
		r, ok, err := s.peekKey(ctx, i, q, limitKey(base, q.rule, k))
		if err != nil || !ok {
			continue
		}
		wait := r.RetryAfter
		if r.Allowed {
			if uint64(r.Remaining) >= q.cost {
				continue // it would admit
			}
			wait = r.ResetAfter
		}
		if wait > res.RetryAfter {
			best, res = k, sluice.Result{RetryAfter: wait}
		}
	}
	return best, res
}

// checkAll answers a check-only or refunding descriptor of several
// limits.
func (s *Service) checkAll(ctx context.Context, domain string, i int, p *plan, sp *statusParts, o *outcome, qs []plan, base string) error {
	if p.refund {
		for j := range qs {
			q := &qs[j]
			if c := q.lim.Capacity(); q.cost > 0 && c >= 1 {
				if err := s.giveBack(ctx, i, q, limitKey(base, q.rule, j), int(min(q.cost, uint64(c)))); err != nil {
					return err
				}
			}
		}
		o.st.LimitRemaining = clampUint32(int64(p.lim.Capacity()))
		return nil
	}
	best := -1
	var bestRes sluice.Result
	for j := range qs {
		q := &qs[j]
		res, ok, err := s.peekKey(ctx, i, q, limitKey(base, q.rule, j))
		if err != nil {
			return s.storeError(ctx, i, q, err)
		}
		if !ok {
			return s.decideCheck(ctx, domain, i, p, sp, o)
		}
		if best < 0 || tighter(res, bestRes) {
			best, bestRes = j, res
		}
	}
	report(p, &qs[best], sp)
	s.peeked(o, sp, bestRes)
	return nil
}

// refundLimits gives back what the limits qs spent, a request refused by
// a later limit of their list. A failing refund is counted and logged,
// not the request's error: the refusal stands either way.
func (s *Service) refundLimits(ctx context.Context, i int, qs []plan, base string) {
	for j := range qs {
		q := &qs[j]
		c := q.lim.Capacity()
		if c < 1 {
			continue
		}
		if err := s.giveBack(ctx, i, q, limitKey(base, q.rule, j), int(min(q.cost, uint64(c)))); err != nil {
			s.logError(i, q, err)
		}
	}
}

// unspend gives back what every descriptor of a request spent, because
// one of them was over its limit (Config.StopIncrementWhenOverLimit), and
// puts the cost back in their limit_remaining.
func (s *Service) unspend(ctx context.Context, domain string, plans []plan, outs []outcome) error {
	for i := range outs {
		o := &outs[i]
		if !o.spent {
			continue
		}
		p := &plans[i]
		base := s.storeKey(domain, p.entries)
		if len(p.rule.More) > 0 {
			s.refundLimits(ctx, i, limitPlans(p), base)
		} else if c := p.lim.Capacity(); c >= 1 {
			if err := s.giveBack(ctx, i, p, base, int(min(p.cost, uint64(c)))); err != nil {
				return err
			}
		}
		o.spent = false
		o.remain = min(o.remain+int64(min(p.cost, uint64(p.lim.Capacity()))), int64(p.lim.Capacity()))
		o.st.LimitRemaining = clampUint32(o.remain)
	}
	return nil
}
