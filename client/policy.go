package client

import (
	"math"
	"math/bits"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/rlheader"
)

// DefaultFraction is Pacer.Fraction's default: the share of a quota the
// server announces that a Pacer uses.
const DefaultFraction = 0.9

// maxPolicyMemory bounds how long a Pacer remembers a learned policy for a
// key that sends nothing.
const maxPolicyMemory = time.Hour

// learned is what a Pacer draws from one RateLimit-Policy field: the limit
// that keeps under every request policy announced below the Pacer's Limit.
type learned struct {
	limit sluice.Limit
	// window is the longest window of the policies the limit obeys.
	window time.Duration
}

// learnPolicies reads h's RateLimit-Policy field. ok is false when h has no
// such field or a malformed one: then the response says nothing, and what
// was learned before stands. Otherwise l.limit.Rate is 0 when no announced
// policy is below lim, and lim applies unchanged.
func learnPolicies(h http.Header, lim sluice.Limit, frac float64) (l learned, ok bool) {
	vs := h.Values(rlheader.HeaderRateLimitPolicy)
	if len(vs) == 0 {
		return learned{}, false
	}
	ps, err := rlheader.ParsePolicies(vs)
	if err != nil || len(ps) == 0 {
		return learned{}, false
	}
	l.limit, l.window = policyLimit(lim, ps, frac)
	return l, true
}

// policyLimit returns the limit that keeps a client under every policy of
// ps whose rate (q per w) is below lim's (Rate per Period), using frac of
// each quota, and the longest window of those policies. It returns a zero
// Limit when no policy is below lim's rate.
//
// Only policies counted in requests (qu absent or "requests") and with a
// window count; a partition key is ignored, since the Pacer's key already
// names one client's allowance. A policy with a quota of 0 is taken as a
// quota of 1: the Pacer keeps probing, slowly, to learn when the server
// admits it again (the RateLimit field's r=0 holds it meanwhile).
//
// The limit is a token bucket (or a leaky bucket when lim is one) of
// ⌊frac·q⌋ per w with a burst of min(⌊frac·q⌋, q−⌊frac·q⌋), at least 1:
// any span of w then admits at most q requests, even against a server
// that counts q per sliding window. The tightest rate of the policies
// applies, with the smallest of their bursts and lim's capacity.
func policyLimit(lim sluice.Limit, ps []rlheader.Policy, frac float64) (sluice.Limit, time.Duration) {
	if lim.Validate() != nil {
		return sluice.Limit{}, 0
	}
	var out sluice.Limit
	var window time.Duration
	for _, p := range ps {
		if p.Unit != "" && p.Unit != rlheader.UnitRequests || p.Window <= 0 || p.Quota < 0 {
			continue
		}
		if !slower(p.Quota, p.Window, int64(lim.Rate), lim.Period) {
			continue
		}
		l, ok := scaledPolicy(p.Quota, p.Window, frac)
		if !ok || !slower(int64(l.Rate), l.Period, int64(lim.Rate), lim.Period) {
			continue // a quota of 0, paced as 1, may still be above lim
		}
		window = max(window, p.Window)
		if out.Rate == 0 {
			out = l
			continue
		}
		if slower(int64(l.Rate), l.Period, int64(out.Rate), out.Period) {
			out.Rate, out.Period = l.Rate, l.Period
		}
		out.Burst = min(out.Burst, l.Burst)
	}
	if out.Rate == 0 {
		return sluice.Limit{}, 0
	}
	out.Burst = min(out.Burst, lim.Capacity())
	if lim.Algorithm == sluice.LeakyBucket {
		out.Algorithm = sluice.LeakyBucket
	}
	if out.Validate() != nil {
		return sluice.Limit{}, 0
	}
	return out, window
}

// scaledPolicy returns the token bucket that uses frac of q requests per w,
// as policyLimit describes, or false when the core cannot express it (a
// window or a spacing of more than sluice.MaxPeriod).
func scaledPolicy(q int64, w time.Duration, frac float64) (sluice.Limit, bool) {
	q = max(q, 1)
	x := math.Floor(frac * float64(q)) // requests per w; at most q ≤ MaxInteger
	l := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: int(x), Period: w}
	if x < 1 {
		// Less than one request per w: one per w/(frac·q), rounded up.
		p := math.Ceil(float64(w) / (frac * float64(q)))
		if !(p <= float64(sluice.MaxPeriod)) {
			return sluice.Limit{}, false
		}
		l.Rate, l.Period = 1, time.Duration(p)
	}
	// x ≤ q ≤ rlheader.MaxInteger < sluice.MaxRate: no clamping needed.
	l.Burst = int(max(min(x, float64(q)-x), 1))
	if l.Validate() != nil {
		return sluice.Limit{}, false
	}
	return l, true
}

// slower reports whether a per b is a lower rate than c per d, for
// non-negative a and c and positive b and d, exactly: a·d < c·b in 128 bits.
func slower(a int64, b time.Duration, c int64, d time.Duration) bool {
	hi1, lo1 := bits.Mul64(uint64(a), uint64(d))
	hi2, lo2 := bits.Mul64(uint64(c), uint64(b))
	return hi1 < hi2 || hi1 == hi2 && lo1 < lo2
}

// fraction returns f if it is in (0, 1], else DefaultFraction.
func fraction(f float64) float64 {
	if f > 0 && f <= 1 {
		return f
	}
	return DefaultFraction
}
