package algorithm

import (
	"time"

	"github.com/sluicehq/sluice"
)

// LeakyBucket is the leaky bucket as a meter, with NGINX limit_req's exact
// accounting: the rate in milli-requests per second (truncated as NGINX
// truncates it), a millisecond clock, and an excess in milli-requests that
// drains at the rate. A request of cost c at now (in ms) computes
//
//	excess = max(Excess − rate·(now−Last)/1000 + 1000, 0) + 1000·(c−1)
//
// and is rejected when excess exceeds (Burst−1)·1000; a rejected request
// changes nothing. For c = 1 this is NGINX's formula step for step, and a
// fresh key starts at excess 0, so Burst requests pass back to back
// (NGINX's burst=B is Burst B+1).
//
// The bucket level after an admitted request is Excess+1000 milli-requests;
// a queue delays a request until the level has drained to its delay
// threshold (see package queue). Elapsed times below −60 s count as 1 ms and
// other negative ones as 0, as NGINX treats clock jumps.
type LeakyBucket struct {
	// Excess is NGINX's excess in milli-requests after the last admitted
	// request; −1000 means an empty bucket.
	Excess int64
	// Last is the time of the last admitted request, in Unix milliseconds.
	Last int64
	// Until is the instant, in Unix nanoseconds, at which the bucket has
	// drained empty; zero for a fresh key.
	Until int64
}

// MilliRate returns lim's rate in milli-requests per second, truncated as
// NGINX truncates "30r/m" to 500.
func MilliRate(lim sluice.Limit) int64 {
	return mulDiv(int64(lim.Rate), 1e12, int64(lim.Period))
}

// level returns the bucket level (excess+1000, clamped at 0) drained to nowMs,
// with NGINX's handling of clock jumps, and the elapsed ms it used.
func (s *LeakyBucket) level(nowMs, rate int64) (lvl, ms int64) {
	if s.Until == 0 {
		return 0, 1
	}
	ms = nowMs - s.Last
	if ms < -60000 {
		ms = 1
	} else if ms < 0 {
		ms = 0
	}
	lvl = s.Excess + 1000
	if ms > lvl*1000/rate { // drained for sure; also avoids overflow below
		return 0, ms
	}
	return max(lvl-rate*ms/1000, 0), ms
}

// Take decides a request of cost units at now and charges it if admitted.
func (s *LeakyBucket) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	return s.TakeRate(now, lim, MilliRate(lim), cost)
}

// TakeRate is Take with rate = MilliRate(lim) already computed, for stores
// that keep it: it costs a 128-bit division.
func (s *LeakyBucket) TakeRate(now int64, lim sluice.Limit, rate int64, cost int) sluice.Result {
	nowMs := floorDiv(now, 1e6)
	burst := int64(lim.Burst-1) * 1000
	lvl, ms := s.level(nowMs, rate)
	excess := lvl + 1000*int64(cost-1)
	var res sluice.Result
	if excess > burst {
		if lvl <= burst {
			res.Remaining = int((burst-lvl)/1000) + 1
		}
		// Wait until rate·ms'/1000 ≥ need, with ms' counted from Last.
		need := s.Excess + 1000 + 1000*int64(cost-1) - burst
		wait := (s.Last+ceilDiv(need*1000, rate))*1e6 - now
		res.RetryAfter = time.Duration(max(wait, 1))
		res.ResetAfter = time.Duration(max(s.Until-now, 0))
		return res
	}
	s.Excess = excess
	if ms != 0 {
		s.Last = nowMs
	}
	s.Until = (s.Last + ceilDiv((excess+1000)*1000, rate)) * 1e6
	res.Allowed = true
	res.Remaining = int((burst - excess) / 1000)
	res.ResetAfter = time.Duration(max(s.Until-now, 0))
	return res
}

// Peek reports the bucket drained to now without charging: Remaining is
// how many requests would pass back to back, ResetAfter the time until it
// has drained empty, 0 for an empty bucket.
func (s *LeakyBucket) Peek(now int64, lim sluice.Limit) sluice.Result {
	c := *s // a value with no heap: Take of cost 0 on a copy changes nothing here
	return c.Take(now, lim, 0)
}

// Refund takes cost requests back out of the bucket at now. If the Take it
// undoes moved Last forward, NGINX's truncated drain has lost a fraction of
// a milli-request that Refund cannot restore: the refunded bucket may be
// up to one milli-request stricter than one never charged, never looser.
func (s *LeakyBucket) Refund(now int64, lim sluice.Limit, cost int) {
	rate := MilliRate(lim)
	nowMs := floorDiv(now, 1e6)
	lvl, ms := s.level(nowMs, rate)
	lvl -= 1000 * int64(cost)
	if lvl <= 0 {
		*s = LeakyBucket{}
		return
	}
	s.Excess = lvl - 1000
	if ms != 0 { // as in Take: a clock that steps back does not move Last
		s.Last = nowMs
	}
	s.Until = (s.Last + ceilDiv(lvl*1000, rate)) * 1e6
}

// Expires returns the instant at which the bucket has drained empty.
func (s *LeakyBucket) Expires() int64 { return s.Until }

// Prepare returns MilliRate(lim), for TakePrepared.
func (*LeakyBucket) Prepare(lim sluice.Limit) int64 { return MilliRate(lim) }

// TakePrepared is TakeRate: rate = Prepare(lim).
func (s *LeakyBucket) TakePrepared(now int64, lim sluice.Limit, rate int64, cost int) sluice.Result {
	return s.TakeRate(now, lim, rate, cost)
}

// Bytes returns 0: a leaky bucket holds no heap.
func (*LeakyBucket) Bytes() int { return 0 }
