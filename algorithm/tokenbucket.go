package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

// TokenBucket is a token bucket in its one-timestamp GCRA form (the generic
// cell rate algorithm): instead of a token count and a refill time it keeps
// the theoretical arrival time TAT, the instant at which the bucket would be
// full again. With emission interval T = Period/Rate (rounded up, so the
// limit is never exceeded) a request of cost c at now is admitted when
//
//	max(TAT, now) + c·T − now ≤ Burst·T
//
// and then TAT becomes max(TAT, now) + c·T. This is exactly a bucket of Burst
// tokens refilled at Rate per Period, in 8 bytes and with no division on the
// decision path beyond T.
type TokenBucket struct {
	// TAT is the theoretical arrival time in Unix nanoseconds; at or before
	// now the bucket is full.
	TAT int64
}

// Interval returns GCRA's emission interval for lim in nanoseconds: the time
// one unit takes to refill, Period/Rate rounded up.
func Interval(lim sluice.Limit) int64 {
	return (int64(lim.Period)-1)/int64(lim.Rate) + 1 // ⌈P/R⌉ without overflow
}

// Take decides a request of cost units at now and spends them if admitted.
func (s *TokenBucket) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	return s.TakeInterval(now, lim, Interval(lim), cost)
}

// TakeInterval is Take with the emission interval t = Interval(lim) already
// computed. Interval costs a 64-bit division, the dearest step of a
// decision; a store that sees the same limit many times may keep it.
func (s *TokenBucket) TakeInterval(now int64, lim sluice.Limit, t int64, cost int) sluice.Result {
	span := int64(lim.Burst) * t // the time to refill an empty bucket
	tat := max(s.TAT, now)
	next := tat + int64(cost)*t
	var res sluice.Result
	if next-now > span {
		res.Remaining = int(max(now+span-tat, 0) / t)
		res.RetryAfter = time.Duration(next - span - now)
		res.ResetAfter = time.Duration(tat - now)
		return res
	}
	s.TAT = next
	res.Allowed = true
	res.Remaining = int(max(now+span-next, 0) / t)
	res.ResetAfter = time.Duration(next - now)
	return res
}

// Peek reports the bucket at now without spending: ResetAfter is the time
// until it is full, 0 for a full bucket.
func (s *TokenBucket) Peek(now int64, lim sluice.Limit) sluice.Result {
	c := *s // a value with no heap: Take of cost 0 on a copy changes nothing here
	return c.Take(now, lim, 0)
}

// Refund gives cost units back at now, never beyond a full bucket.
func (s *TokenBucket) Refund(now int64, lim sluice.Limit, cost int) {
	s.TAT -= int64(cost) * Interval(lim)
	if s.TAT <= now {
		s.TAT = 0
	}
}

// Expires returns the instant from which the bucket is full again.
func (s *TokenBucket) Expires() int64 { return s.TAT }

// Prepare returns Interval(lim), for TakePrepared.
func (*TokenBucket) Prepare(lim sluice.Limit) int64 { return Interval(lim) }

// TakePrepared is TakeInterval: t = Prepare(lim).
func (s *TokenBucket) TakePrepared(now int64, lim sluice.Limit, t int64, cost int) sluice.Result {
	return s.TakeInterval(now, lim, t, cost)
}

// Bytes returns 0: a token bucket holds no heap.
func (*TokenBucket) Bytes() int { return 0 }
