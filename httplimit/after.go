package httplimit

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
)

// DefaultCostHeader is the response header (or trailer) a policy with a
// Settle reads the actual cost from when Settle.Header is empty.
const DefaultCostHeader = "Sluice-Cost"

// Settle says where a policy finds a request's actual cost once the handler
// has answered: the request was admitted on its estimated cost (Policy.Cost,
// or 1), and the difference is settled then, refunded when the actual cost
// is lower, charged when it is higher, into debt if need be (see
// sluice.Charger), so that the key's next requests wait what it owes and
// their headers say so. What the response itself reported was the estimate.
// A request whose client left before the handler answered is charged at
// least its estimate: a lower actual cost refunds nothing.
type Settle struct {
	// Header is the response header or trailer that holds the actual cost,
	// a decimal integer of at least 0 (up to 18 digits). Empty means
	// DefaultCostHeader. A response without it, or with anything else in
	// it, leaves the estimate spent (a bad value is logged).
	Header string
	// Cost, when not nil, returns the actual cost instead of Header, from
	// the request, the status answered and the response's header map
	// (trailers included, under http.TrailerPrefix when the handler
	// declared none); ok false leaves the estimate spent.
	Cost func(r *http.Request, status int, h http.Header) (cost int, ok bool)
}

// maxCostDigits bounds the digits of a cost header: work bounded by the
// bytes the upstream sent, and no overflow.
const maxCostDigits = 18

// StatusSet is a set of HTTP statuses (100 to 599), for a policy that counts
// only the responses it matches. The zero StatusSet is empty.
type StatusSet struct{ bits [8]uint64 }

// ParseStatusSet returns the set of the statuses items name: each an exact
// status ("401") or a class ("4xx", "5xx").
func ParseStatusSet(items ...string) (StatusSet, error) {
	var s StatusSet
	for _, it := range items {
		if len(it) == 3 && it[0] >= '1' && it[0] <= '5' && strings.EqualFold(it[1:], "xx") {
			base := int(it[0]-'0') * 100
			for c := base; c < base+100; c++ {
				s.Add(c)
			}
			continue
		}
		c, err := strconv.Atoi(it)
		if err != nil || len(it) != 3 || c < 100 || c > 599 {
			return StatusSet{}, fmt.Errorf("httplimit: %q is not a status (100 to 599) or a class (1xx to 5xx)", it)
		}
		s.Add(c)
	}
	return s, nil
}

// Add puts status in the set; a status outside 100 to 599 is ignored.
func (s *StatusSet) Add(status int) {
	if status >= 100 && status <= 599 {
		i := status - 100
		s.bits[i/64] |= 1 << (i % 64)
	}
}

// Has reports whether status is in the set.
func (s *StatusSet) Has(status int) bool {
	if status < 100 || status > 599 {
		return false
	}
	i := status - 100
	return s.bits[i/64]&(1<<(i%64)) != 0
}

// IsEmpty reports whether the set holds no status.
func (s *StatusSet) IsEmpty() bool { return s.bits == [8]uint64{} }

// checkAfter checks what p asks of the limiter after the response (Settle,
// CountOnly) and for its penalty box: the capabilities it needs, a
// settlement it can carry, and a box limit the limiter can hold, in that
// order (the first error is returned).
func checkAfter(limiter sluice.Limiter, p *Policy) error {
	if err := checkAfterCapabilities(limiter, p); err != nil {
		return err
	}
	if err := checkSettlement(p); err != nil {
		return err
	}
	return checkPenalty(limiter, p)
}

// checkAfterCapabilities checks that a policy which charges after the
// response (Settle, CountOnly, Penalty) has no Queue and a limiter that can
// charge, and refund for Settle and CountOnly (a reservation given back).
func checkAfterCapabilities(limiter sluice.Limiter, p *Policy) error {
	_, charges := limiter.(sluice.Charger)
	if p.Settle != nil || !p.CountOnly.IsEmpty() || p.Penalty > 0 {
		if p.Queue != nil {
			return fmt.Errorf("httplimit: policy %q: Settle, CountOnly and Penalty do not go with a Queue", p.Name)
		}
		if !charges {
			return fmt.Errorf("httplimit: policy %q: %w: %T has no ChargeN", p.Name, sluice.ErrCannotSettle, limiter)
		}
	}
	if _, ok := limiter.(sluice.Refunder); (p.Settle != nil || !p.CountOnly.IsEmpty()) && !ok {
		return fmt.Errorf("httplimit: policy %q: %w: %T has no RefundN", p.Name, sluice.ErrCannotSettle, limiter)
	}
	return nil
}

// checkSettlement checks Settle's header name, that the algorithm can
// carry the debt a settlement or a counted response leaves, and that Settle
// and CountOnly are not both set.
func checkSettlement(p *Policy) error {
	if p.Settle != nil && p.Settle.Header != "" && p.Settle.Cost == nil {
		for i := 0; i < len(p.Settle.Header); i++ {
			if c := p.Settle.Header[i]; c <= ' ' || c >= 0x7f || c == ':' {
				return fmt.Errorf("httplimit: policy %q: %q is not a header name", p.Name, p.Settle.Header)
			}
		}
	}
	if a := p.Limit.Algorithm; (p.Settle != nil || !p.CountOnly.IsEmpty()) && a != sluice.TokenBucket && a != sluice.FixedWindow && a != sluice.SlidingWindow {
		return fmt.Errorf("httplimit: policy %q: %w: %v cannot carry a debt (use token_bucket, fixed_window or sliding_window)", p.Name, sluice.ErrInvalidLimit, a)
	}
	if p.Settle != nil && !p.CountOnly.IsEmpty() {
		return fmt.Errorf("httplimit: policy %q: Settle and CountOnly exclude each other (a counted response costs 1)", p.Name)
	}
	return nil
}

// checkPenalty checks p's penalty box: not negative, and when set, a
// limiter that can Peek and hold the box's limit.
func checkPenalty(limiter sluice.Limiter, p *Policy) error {
	if p.Penalty < 0 {
		return fmt.Errorf("httplimit: policy %q: penalty %v is negative", p.Name, p.Penalty)
	}
	if p.Penalty == 0 {
		return nil
	}
	if _, ok := limiter.(sluice.Peeker); !ok {
		return fmt.Errorf("httplimit: policy %q: a penalty box needs a limiter that can Peek; %T cannot", p.Name, limiter)
	}
	box := boxLimit(p.Penalty)
	if err := box.Validate(); err != nil {
		return fmt.Errorf("httplimit: policy %q: penalty %v: %w", p.Name, p.Penalty, err)
	}
	if v, ok := limiter.(sluice.LimitValidator); ok {
		if err := v.ValidateLimit(box); err != nil {
			return fmt.Errorf("httplimit: policy %q: penalty %v: %w", p.Name, p.Penalty, err)
		}
	}
	return nil
}

// boxLimit is the limit of a penalty box of d: one unit per d, so that a
// charge of one empties it until d has passed, to the nanosecond.
func boxLimit(d time.Duration) sluice.Limit {
	return sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1, Period: d, Burst: 1}
}

// boxPrefix starts a penalty box's key: no policy's key starts with a NUL
// byte (every key starts with its policy's printable name).
const boxPrefix = "\x00box:"

// failPrefix starts the key that counts a CountOnly policy's counted
// responses alone, for its penalty box (its own key counts them and the
// reservations of requests still in the handler).
const failPrefix = "\x00fail:"

// boxKey is the key of key's penalty box (key is a policy's final key).
func boxKey(key string) string { return innerKey(boxPrefix, key) }

// innerKey is the key under prefix (boxPrefix, failPrefix) of a policy's
// final key, hashed when it would be too long.
func innerKey(prefix, key string) string {
	k := prefix + key
	if len(k) > sluice.MaxKeyLen {
		return sluice.HashKey(prefix, k)
	}
	return k
}

// decide is p's decision on key: refused while the key is in p's penalty
// box; for a policy that counts responses, a reservation of one unit
// (refused when none is left; a shadow policy only looks); else AllowN, and
// a refusal puts the key in the box.
func (m *Middleware) decide(ctx context.Context, p *compiled, key string, cost int) (sluice.Result, error) {
	if p.Penalty > 0 {
		if res, boxed, err := m.boxed(ctx, p, key); err != nil || boxed {
			return res, err
		}
	}
	if !p.CountOnly.IsEmpty() && !p.Shadow {
		// Reserve before the handler runs: the unit of a response that
		// may be counted is spent before it can be, so that however
		// many arrive at once, no more than the limit can be counted.
		// A refusal here does not box: the units may be reservations
		// that come back.
		return m.cfg.Limiter.AllowN(ctx, key, p.Limit, 1)
	}
	if !p.CountOnly.IsEmpty() {
		res, err := m.cfg.Limiter.(sluice.Peeker).Peek(ctx, key, p.Limit)
		if err == nil && res.Allowed && res.Remaining == 0 {
			// Nothing left: a request now would be over the count.
			res.Allowed, res.RetryAfter = false, untilOneUnit(p.Limit, res.ResetAfter)
		}
		return res, err
	}
	res, err := m.cfg.Limiter.AllowN(ctx, key, p.Limit, cost)
	if err == nil && !res.Allowed && p.Penalty > 0 {
		return m.box(ctx, p, key)
	}
	return res, err
}

// untilOneUnit is the time until a key with nothing left under lim, whose
// state resets in reset, has a unit again: exact for a token bucket (its
// reset less the refill of all but one unit) and a fixed window (its
// reset); for a sliding window, the reset, at the latest.
func untilOneUnit(lim sluice.Limit, reset time.Duration) time.Duration {
	if lim.Algorithm != sluice.TokenBucket {
		return reset
	}
	t := (int64(lim.Period)-1)/int64(lim.Rate) + 1 // the emission interval
	return max(reset-time.Duration(int64(lim.Burst-1)*t), 0)
}

// boxed reports whether key is in a penalty box, and the refusal if so.
func (m *Middleware) boxed(ctx context.Context, p *compiled, key string) (sluice.Result, bool, error) {
	// Under a box of any length, the key is boxed while its theoretical
	// arrival time is ahead: a penalty changed by a reload keeps a box
	// already running to its end.
	res, err := m.cfg.Limiter.(sluice.Peeker).Peek(ctx, boxKey(key), boxLimit(p.Penalty))
	if err != nil || res.Remaining > 0 {
		return sluice.Result{}, false, err
	}
	return sluice.Result{RetryAfter: res.ResetAfter, ResetAfter: res.ResetAfter}, true, nil
}

// box puts key in p's penalty box for p.Penalty, unless it is in it
// already, and returns the refusal with the time left in the box. The box's
// one unit is taken with AllowN, not charged: breaches at once (requests
// refused together, settlements or counted responses racing) box the key
// once, where a charge per breach would put the box in debt and double the
// penalty.
func (m *Middleware) box(ctx context.Context, p *compiled, key string) (sluice.Result, error) {
	res, err := m.cfg.Limiter.AllowN(ctx, boxKey(key), boxLimit(p.Penalty), 1)
	if err != nil {
		return sluice.Result{}, err
	}
	if !res.Allowed { // boxed already, by a breach at the same time
		return sluice.Result{RetryAfter: res.RetryAfter, ResetAfter: res.RetryAfter}, nil
	}
	m.cfg.Logger.Info("httplimit: key put in the penalty box", "policy", p.Name, "key", m.logKey(p.Name, key), "for", p.Penalty)
	return sluice.Result{RetryAfter: p.Penalty, ResetAfter: p.Penalty}, nil
}

// needsAfter reports whether a decision asks for the response: a policy
// that settles, or one that counts responses.
func needsAfter(ds []decision) bool {
	for i := range ds {
		if ds[i].p.Settle != nil || !ds[i].p.CountOnly.IsEmpty() {
			return true
		}
	}
	return false
}

// afterResponse settles and counts, for each decision that asks, once the
// handler has answered with sw's status. A charge outlives the request (a
// client that hangs up as soon as it has its answer still pays), bounded
// by a second, as a refund is; a give-back runs on the request's context
// while the client is there (cancelled, it leaves the unit spent). A
// client that went away is charged at least what it reserved: a
// settlement below the estimate refunds nothing, and a counted policy's
// reservation stays when no status was written (the request may have
// been served; its answer is unknown).
func (m *Middleware) afterResponse(r *http.Request, sw *statusWriter, ds []decision) {
	status := sw.status()
	gone := r.Context().Err() != nil // the handler has not returned: the client left
	var held context.Context         // made on first use: most responses need no charge
	for i := range ds {
		d := &ds[i]
		if !d.res.Allowed {
			continue
		}
		actual, ok := 0, false
		counted := d.p.CountOnly.Has(status) // false for a policy that counts none
		switch {
		case d.p.Settle != nil:
			actual, ok = m.actualCost(r, d.p, status, sw.Header())
			if gone {
				actual = max(actual, d.cost)
			}
			ok = ok && actual != d.cost
		case !d.p.CountOnly.IsEmpty():
			if !counted && gone && sw.code == 0 {
				continue // unknown: the reservation stays
			}
			// A response not counted gets its reservation back; a
			// counted one keeps it, and counts for the penalty box.
			ok = !counted || d.p.Penalty > 0
		}
		if !ok {
			continue
		}
		ctx := r.Context()
		refund := actual < d.cost // a settlement's surplus
		if d.p.Settle == nil {
			refund = !counted // a reservation given back
		}
		if gone || !refund {
			if held == nil {
				var cancel context.CancelFunc
				held, cancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
				defer cancel()
			}
			ctx = held
		}
		switch {
		case d.p.Settle != nil:
			m.settle(ctx, d, actual)
		case counted:
			m.count(ctx, d)
		default:
			m.unreserve(ctx, d)
		}
	}
}

// actualCost reads the actual cost of a request under p from its Settle.
func (m *Middleware) actualCost(r *http.Request, p *compiled, status int, h http.Header) (int, bool) {
	if p.Settle.Cost != nil {
		c, ok := p.Settle.Cost(r, status, h)
		return max(c, 0), ok
	}
	name := p.Settle.Header
	if name == "" {
		name = DefaultCostHeader
	}
	v := h.Get(name)
	if v == "" {
		v = h.Get(http.TrailerPrefix + name)
	}
	if v == "" {
		return 0, false
	}
	v = strings.TrimSpace(v)
	if len(v) == 0 || len(v) > maxCostDigits || strings.IndexFunc(v, func(c rune) bool { return c < '0' || c > '9' }) >= 0 {
		m.cfg.Logger.Warn("httplimit: the actual cost is not a whole number; the estimate stays spent", "policy", p.Name, "header", name, "value", strconv.Quote(v[:min(len(v), 32)]))
		return 0, false
	}
	c, _ := strconv.Atoi(v) // 18 digits fit
	return c, true
}

// settle makes d's request cost actual: the surplus of the estimate
// refunded, the shortfall charged (into debt if need be). A charge that
// leaves the key over its limit puts it in the penalty box, if p has one.
func (m *Middleware) settle(ctx context.Context, d *decision, actual int) {
	var err error
	switch {
	case actual < d.cost:
		err = m.cfg.Limiter.(sluice.Refunder).RefundN(ctx, d.key, d.p.Limit, d.cost-actual)
	case actual > d.cost:
		var res sluice.Result
		res, err = m.cfg.Limiter.(sluice.Charger).ChargeN(ctx, d.key, d.p.Limit, actual-d.cost)
		if err == nil && !res.Allowed && d.p.Penalty > 0 {
			_, err = m.box(ctx, d.p, d.key)
		}
	}
	if err != nil {
		m.cfg.Metrics.storeError(d.p.Name)
		m.cfg.Logger.Warn("httplimit: settling the actual cost failed", "policy", d.p.Name, "err", err)
	}
}

// count counts a response d's policy counts, for its penalty box: its
// reservation stays spent on d's key, and one unit is charged on the key
// of the counted responses alone (see failPrefix), whose unit that leaves
// none puts the key in the box. Requests still in the handler hold units
// of d's key, not of that one: they box no one before they are counted.
func (m *Middleware) count(ctx context.Context, d *decision) {
	res, err := m.cfg.Limiter.(sluice.Charger).ChargeN(ctx, innerKey(failPrefix, d.key), d.p.Limit, 1)
	if err == nil && (res.Remaining == 0 || !res.Allowed) {
		_, err = m.box(ctx, d.p, d.key)
	}
	if err != nil {
		m.cfg.Metrics.storeError(d.p.Name)
		m.cfg.Logger.Warn("httplimit: counting the response failed", "policy", d.p.Name, "err", err)
	}
}

// unreserve gives back the unit d's request reserved under a policy that
// counts responses, whose response was not one it counts.
func (m *Middleware) unreserve(ctx context.Context, d *decision) {
	if err := m.cfg.Limiter.(sluice.Refunder).RefundN(ctx, d.key, d.p.Limit, 1); err != nil {
		m.cfg.Metrics.storeError(d.p.Name)
		m.cfg.Logger.Warn("httplimit: giving back a response's reservation failed", "policy", d.p.Name, "err", err)
	}
}
