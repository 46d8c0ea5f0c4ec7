package algorithm

import (
	"math"
	"time"

	"github.com/sluicehq/sluice"
)

// SlidingBuckets is the sliding window counter with k = lim.Buckets
// sub-windows per period (2 ≤ k ≤ sluice.MaxBuckets): it keeps the units of
// the current epoch-aligned sub-window of g = Period/k and of the k before
// it, and estimates the units spent in the last Period as the sum of the k
// most recent sub-windows (the current one included) plus the oldest one
// weighted by the share of it still inside the period:
//
//	estimate = ⌊C(n−k) · (g − elapsed) / g + ½⌋ + C(n−k+1) + … + C(n)
//
// where n numbers the current sub-window and elapsed is the time since it
// began. A request of cost c is admitted when estimate + c ≤ Rate. Only the
// oldest sub-window is assumed to be spread evenly, so the estimate is off
// by at most that sub-window's units, a k-th of the two-window counter's
// (SlidingWindow, which is this with k = 1). The error measured on two
// populations, for k from 1 to 16, is in docs/algorithms.md.
//
// Example: 100/min in 4 sub-windows of 15 s with 20, 30, 10, 25 and 5 units
// (oldest first), 6 s into the current one: ⌊20·9/15⌋ + 30 + 10 + 25 + 5 =
// 82, so 18 more are admitted.
//
// A clock that steps back less than a period forgets nothing: a reading
// before the current sub-window's start is decided at the start (elapsed
// 0), and no unit moves back in time.
//
// The state is 88 bytes whatever k. A state used under a different k (the
// limit changed) adds up its units into the current sub-window and goes on
// under the new k: nothing counted is forgotten.
type SlidingBuckets struct {
	// Start is the start of the current sub-window in Unix nanoseconds.
	Start int64
	// Until is the instant from which no counted unit weighs on the
	// estimate any more; zero for a fresh key.
	Until int64
	// Counts holds the units of sub-window number i (Start/g for the
	// current one) at Counts[i mod (K+1)], for the current sub-window and
	// the K before it; the rest are zero.
	Counts [sluice.MaxBuckets + 1]uint32
	// K is the number of sub-windows the counts are kept for; 0 for a fresh
	// key.
	K uint8
	// i is the index in Counts of the current sub-window, (Start/g) mod
	// (K+1), kept so that a decision within it does no division.
	i uint8
	// tag identifies the sub-window length g that Start and i were set
	// under (gTag); a state used under another g goes the slow way once.
	tag uint16
}

// gTag returns a 16-bit hash of a sub-window length g, never 0 (the zero
// state's). Two lengths share a tag once in 65536: a state whose period
// changes to such a length goes on with its sub-windows aligned to the old
// one's until it next takes the slow way, an estimate of the same kind.
func gTag(g int64) uint16 {
	if h := uint16(uint64(g) * 0x9e3779b97f4a7c15 >> 48); h != 0 {
		return h
	}
	return 1
}

// bucketsOf returns lim's number of sub-windows, at least 1.
func bucketsOf(lim sluice.Limit) int64 { return max(int64(lim.Buckets), 1) }

// slot returns the index in Counts of sub-window n under k sub-windows.
func slot(n, k int64) int {
	m := n % (k + 1)
	if m < 0 {
		m += k + 1
	}
	return int(m)
}

// roll moves the state to the sub-window that holds now, of length g, k
// per period, and returns its index in Counts. Within the current
// sub-window it does no division, nor when it steps to one of the next k.
func (s *SlidingBuckets) roll(now, g, k int64) int {
	if int64(s.K) != k || s.tag != gTag(g) || now < s.Start {
		return s.rollSlow(now, g, k)
	}
	i, e := int(s.i), now-s.Start
	for d := int64(0); e >= g; d++ {
		if d == k {
			// More than k sub-windows have passed: none weighs.
			s.Counts = [sluice.MaxBuckets + 1]uint32{}
			n := floorDiv(now, g)
			s.Start, s.i = n*g, uint8(slot(n, k))
			return int(s.i)
		}
		if i++; int64(i) > k {
			i = 0
		}
		s.Counts[i] = 0
		s.Start += g
		e -= g
	}
	s.i = uint8(i)
	return i
}

// rollSlow is roll for a fresh key, a new k or g, or a clock gone back.
func (s *SlidingBuckets) rollSlow(now, g, k int64) int {
	if s.Until != 0 && int64(s.K) == k && now < s.Start && now >= s.Start-k*g && s.Start%g == 0 && int(s.i) == slot(s.Start/g, k) {
		// The clock stepped back less than a period (k and g as they
		// were, something counted): stay in the current sub-window, and the reading counts
		// as its start (elapsed clamps at 0). Moving back would move the
		// units counted since then back too, and they would leave the
		// period early when the clock returned.
		s.tag = gTag(g)
		return int(s.i)
	}
	n := floorDiv(now, g)
	i := slot(n, k)
	s.i, s.tag = uint8(i), gTag(g)
	if int64(s.K) != k || n < floorDiv(s.Start, g) {
		// A fresh key, a new k, or the clock went back more than a
		// period: keep every unit,
		// in the current sub-window. Conservative: nothing counted is
		// forgotten, some is counted longer.
		var total uint64
		for _, c := range s.Counts {
			total += uint64(c)
		}
		s.Counts = [sluice.MaxBuckets + 1]uint32{}
		s.Counts[i] = uint32(min(total, math.MaxUint32))
		s.K, s.Start = uint8(k), n*g
		return i
	}
	cur := floorDiv(s.Start, g)
	if n-cur > k {
		s.Counts = [sluice.MaxBuckets + 1]uint32{}
	} else {
		for j := cur + 1; j <= n; j++ {
			s.Counts[slot(j, k)] = 0
		}
	}
	s.Start = n * g
	return i
}

// oldWeight returns the units of the oldest sub-window, w, still counted
// with left of its g nanoseconds inside the period, under k sub-windows:
// w·left/g rounded to the nearest (half up), ⌊(⌊2w·left/g⌋ + 1)/2⌋.
// Rounding to the nearest rather than down counts no less, and cuts the
// error measured on both populations by about a sixth at 16 sub-windows
// (docs/algorithms.md). With k = 1 it rounds down, as SlidingWindow does.
func oldWeight(w, left, g, k int64) int64 {
	if w == 0 {
		return 0
	}
	if k == 1 {
		return mulDiv(w, left, g)
	}
	return (mulDiv(2*w, left, g) + 1) / 2
}

// oldWeightWithin returns the first elapsed time e in a sub-window of g
// from which oldWeight(w, g−e, g, k) ≤ room, for w > room ≥ 0; g or more
// if there is none within the sub-window.
func oldWeightWithin(w, room, g, k int64) int64 {
	// ⌊W·(g−e)/g⌋ ≤ room  ⇔  e ≥ g − ⌈(room+1)·g/W⌉ + 1 (k = 1);
	// ⌊W·(g−e)/g + ½⌋ ≤ room  ⇔  2W·(g−e)/g < 2·room+1
	//   ⇔  e ≥ g − ⌈(2·room+1)·g/(2W)⌉ + 1
	if k > 1 {
		return g - mulDivCeil(2*room+1, g, 2*w) + 1
	}
	return g - mulDivCeil(room+1, g, w) + 1
}

// back returns the index in Counts of the sub-window m before the one at
// index i, for 0 ≤ m ≤ k.
func back(i int, m, k int64) int {
	j := i - int(m)
	if j < 0 {
		j += int(k) + 1
	}
	return j
}

// parts returns the units of the k most recent sub-windows, those
// counted whole, and the units of the oldest, counted in part, as seen in
// the current sub-window, at index i.
func (s *SlidingBuckets) parts(i int, k int64) (whole, oldest int64) {
	for m := range k {
		whole += int64(s.Counts[back(i, m, k)])
	}
	return whole, int64(s.Counts[back(i, k, k)])
}

// setUntil records when the state becomes fresh again: the newest
// sub-window with units weighs until a whole period after its end.
func (s *SlidingBuckets) setUntil(i int, g, k int64) {
	s.Until = 0
	for m := range k + 1 {
		if s.Counts[back(i, m, k)] != 0 {
			s.Until = s.Start - m*g + g + k*g
			return
		}
	}
}

// Take decides a request of cost units at now and spends them if admitted.
// With lim.CountRejected a rejected request is counted too.
func (s *SlidingBuckets) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	return s.TakePrepared(now, lim, s.Prepare(lim), cost)
}

// TakePrepared is Take with g = Prepare(lim), the sub-window's length.
func (s *SlidingBuckets) TakePrepared(now int64, lim sluice.Limit, g int64, cost int) sluice.Result {
	k := bucketsOf(lim)
	i := s.roll(now, g, k)
	whole, oldest := s.parts(i, k)
	weighted := oldWeight(oldest, g-max(now-s.Start, 0), g, k) // a reading before Start: see rollSlow
	rate, c := int64(lim.Rate), int64(cost)
	var res sluice.Result
	if weighted+whole+c > rate {
		if lim.CountRejected {
			// Counted first, so that RetryAfter includes it; the count
			// stops at 2^32−1, above any rate a bucketed limit may have.
			before := int64(s.Counts[i])
			s.Counts[i] = uint32(min(before+c, math.MaxUint32))
			whole += int64(s.Counts[i]) - before
		}
		res.RetryAfter = time.Duration(s.retryAfter(now, g, k, i, whole, oldest, rate, c))
	} else {
		s.Counts[i] += uint32(c)
		whole += c
		res.Allowed = true
	}
	s.setUntil(i, g, k)
	res.Remaining = int(max(rate-weighted-whole, 0))
	res.ResetAfter = time.Duration(max(s.Until-now, 0))
	return res
}

// retryAfter returns the time from now until a request of cost c fits,
// assuming nothing else is spent: in the current sub-window (at index i,
// with whole and oldest its parts) or one of the next k+1, as sub-windows
// leave the period one by one and the oldest one's weight falls within
// each. By the (k+1)-th nothing counted weighs.
func (s *SlidingBuckets) retryAfter(now, g, k int64, i int, whole, oldest, rate, c int64) int64 {
	for d := int64(0); d <= k+1; d++ {
		if d > 0 {
			// One sub-window later: the oldest has left, and the oldest of
			// those counted whole is counted in part.
			oldest = 0
			if d <= k {
				oldest = int64(s.Counts[back(i, k-d, k)])
				whole -= oldest
			}
		}
		room := rate - c - whole
		if room < 0 {
			continue
		}
		from := int64(0) // the earliest elapsed time considered in n+d
		if d == 0 {
			from = max(now-s.Start, 0)
		}
		at := from
		if oldWeight(oldest, g-from, g, k) > room {
			e := oldWeightWithin(oldest, room, g, k)
			if e >= g {
				continue
			}
			at = max(e, from)
		}
		return max(s.Start+d*g+at-now, 1)
	}
	return g * (k + 1) // not reached: after k+1 sub-windows nothing weighs
}

// Peek reports the estimate at now without spending: ResetAfter is the time
// until no counted unit weighs on it, 0 for a fresh key.
func (s *SlidingBuckets) Peek(now int64, lim sluice.Limit) sluice.Result {
	c := *s
	return c.Take(now, lim, 0)
}

// Refund gives cost units back to the current sub-window.
func (s *SlidingBuckets) Refund(now int64, lim sluice.Limit, cost int) {
	g, k := s.Prepare(lim), bucketsOf(lim)
	i := s.roll(now, g, k)
	s.Counts[i] = uint32(max(int64(s.Counts[i])-int64(cost), 0))
	s.setUntil(i, g, k)
}

// Expires returns the instant from which no counted unit weighs on the
// estimate any more.
func (s *SlidingBuckets) Expires() int64 { return s.Until }

// Prepare returns the length of a sub-window, Period/Buckets.
func (*SlidingBuckets) Prepare(lim sluice.Limit) int64 {
	return int64(lim.Period) / bucketsOf(lim)
}

// Bytes returns 0: the state holds no heap.
func (*SlidingBuckets) Bytes() int { return 0 }
