package algorithm

import (
	"encoding/binary"
	"slices"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// SlidingMoments is the sliding window counter with k = lim.Buckets
// sub-windows per period (1 for 0 or 1) whose sub-windows also keep the
// means of the first d = lim.Moments shifted Legendre polynomials of their
// arrivals' offsets (1 ≤ d ≤ sluice.MaxMoments). As SlidingBuckets, it
// counts the k most recent sub-windows whole; the oldest one's units still
// inside the period it estimates from its count W and its means m_j, as the
// least-squares projection of the arrivals' density on those polynomials,
// integrated over the part still inside, clamped to [0, W] and rounded to
// the nearest unit:
//
//	estimate = W·[(1−x) + Σ_{j=1..d} (P_{j−1}(z) − P_{j+1}(z))/2 · m_j]
//
// where x is the share of the oldest sub-window that has left the period
// (the time elapsed in the current one over g = Period/k), z = 2x−1, and P_j
// the Legendre polynomials on [−1, 1]. With d = 1 it weighs the old
// sub-window by where its arrivals fell on average. docs/algorithms.md has
// the error measured at several k and d.
//
// The arithmetic is integer, so that Redis's script computes the same
// estimate bit for bit: an offset is one of 2^13 levels of its sub-window
// (its midpoint stands for it), a polynomial's value a fixed-point number
// of 14 fraction bits computed by the three-term recurrence with rounding
// at each step, a closed sub-window's mean one signed byte of 7 fraction
// bits. The current sub-window keeps the exact integer sums of its
// arrivals' values (a request of cost c counts c arrivals at its offset)
// and rounds them to means when it closes.
//
// Its retry time is found by search, since the estimate is a polynomial in
// the elapsed time rather than a line, and need not fall monotonically: a
// bisection over the offset levels that skips every stretch in which a
// bound on the polynomial and on the rounding shows that nothing fits
// (fitSearch). It is exact: the first instant at which the request fits,
// if nothing else is spent.
//
// The state is 32 bytes and a buffer of (k+1)·(2+d) + 4·d bytes on the
// heap (Bytes; 70 at k = 8, d = 4): a 16-bit count and d one-byte means for
// each of the k+1 sub-windows, and the current one's d 32-bit sums. Counts
// stop at 65535 (above any rate a limit with moments may have). A state
// used under another k, d or sub-window length adds up its units into the
// current sub-window, where they count whole until it leaves the period:
// nothing counted is forgotten. A clock that steps back up to a period is
// decided in the current sub-window, at its start; one that steps back
// further keeps every unit, pinned, and holds them (Until) until they would
// have stopped weighing had the clock not stepped, should it come forward
// again before then. The zero value is a fresh key.
type SlidingMoments struct {
	// Start is the start of the current sub-window in Unix nanoseconds.
	Start int64
	// Until is the instant from which no counted unit weighs on the
	// estimate any more; zero for a fresh key.
	Until int64
	// p points at the buffer of the counts, means and sums (see the
	// type's comment), n bytes long in an allocation of c; nil for a fresh
	// key. A pointer and two lengths rather than a slice keep the state
	// to 32 bytes (buf makes the slice).
	p    *byte
	n, c uint8
	// k and d are the numbers of sub-windows and means the buffer is laid
	// out for.
	k, d uint8
	// i is the index of the current sub-window among the k+1.
	i uint8
	// tag identifies the sub-window length (gTag).
	tag uint16
	// pin is 1 + the index of a sub-window whose units count whole even
	// as the oldest, until it leaves the period: one that took in the
	// units of a state laid out anew or rebuilt, whose offsets are
	// unknown; 0 for none.
	pin uint8
}

// The fixed-point scales of the moments' arithmetic.
const (
	// momentOne is 1 in the scale of the polynomials' values and sums.
	momentOne = 1 << 14
	// offsetLevels is the number of levels an offset is rounded down to.
	offsetLevels = 1 << 13
	// meanOne is 1 in the scale of a closed sub-window's means.
	meanOne = 1 << 7
	// maxMomentCount is the most units a sub-window counts.
	maxMomentCount = 1<<16 - 1
)

// momentsSize returns the bytes of a state's buffer under k and d.
func momentsSize(k int64, d int) int { return int(k+1)*(2+d) + 4*d }

// buf returns the state's buffer.
func (s *SlidingMoments) buf() []byte { return unsafe.Slice(s.p, s.n) }

// setBuf makes b, whose capacity is below 256, the state's buffer.
func (s *SlidingMoments) setBuf(b []byte) {
	s.p, s.n, s.c = unsafe.SliceData(b), uint8(len(b)), uint8(cap(b))
}

func (s *SlidingMoments) count(j int) int64 {
	return int64(binary.LittleEndian.Uint16(s.buf()[2*j:]))
}

func (s *SlidingMoments) setCount(j int, c int64) {
	binary.LittleEndian.PutUint16(s.buf()[2*j:], uint16(c))
}

// mean returns mean m (1 ≤ m ≤ d) of closed sub-window j.
func (s *SlidingMoments) mean(j, m int) int64 {
	return int64(int8(s.buf()[2*(int(s.k)+1)+j*int(s.d)+m-1]))
}

func (s *SlidingMoments) sumAt(m int) int64 {
	return int64(int32(binary.LittleEndian.Uint32(s.buf()[(int(s.k)+1)*(2+int(s.d))+4*(m-1):])))
}

func (s *SlidingMoments) setSum(m int, v int64) {
	binary.LittleEndian.PutUint32(s.buf()[(int(s.k)+1)*(2+int(s.d))+4*(m-1):], uint32(int32(v)))
}

// legendre fills p[0..d+1] with the values of the Legendre polynomials at
// z, all in the scale momentOne: P_0 = 1, P_1 = z, and
// P_{j+1} = ((2j+1)·z·P_j − j·P_{j−1})/(j+1), rounded to the nearest (half
// up) and clamped to [−1, 1] at each step:
//
//	P_{j+1} = ⌊(2·num + den)/(2·den)⌋,  num = (2j+1)·z·P_j − j·P_{j−1}·momentOne,  den = (j+1)·momentOne
//
// computed as ⌊⌊(2·num + den)/2^15⌋/(j+1)⌋, the same number. Every
// intermediate stays below 2^36 in magnitude, exact in a Lua number.
func legendre(z int64, d int, p *[sluice.MaxMoments + 2]int64) {
	// Unrolled, so that each division is by a constant.
	p[0], p[1] = momentOne, z
	if d == 0 {
		return
	}
	p[2] = legendreStep(z, p[1], p[0], 1)
	if d == 1 {
		return
	}
	p[3] = legendreStep(z, p[2], p[1], 2)
	if d == 2 {
		return
	}
	p[4] = legendreStep(z, p[3], p[2], 3)
	if d == 3 {
		return
	}
	p[5] = legendreStep(z, p[4], p[3], 4)
	if d == 4 {
		return
	}
	p[6] = legendreStep(z, p[5], p[4], 5)
	if d == 5 {
		return
	}
	p[7] = legendreStep(z, p[6], p[5], 6)
	if d == 6 {
		return
	}
	p[8] = legendreStep(z, p[7], p[6], 7)
	if d == 7 {
		return
	}
	p[9] = legendreStep(z, p[8], p[7], 8)
}

// legendreStep returns P_{j+1} from P_j and P_{j−1} at z (see legendre).
func legendreStep(z, pj, pjm1, j int64) int64 {
	num := (2*j+1)*z*pj - j*pjm1*momentOne
	a := (2*num + (j+1)*momentOne) >> 15 // ⌊·/(2·momentOne)⌋
	q := a / (j + 1)
	if q*(j+1) != a && a < 0 {
		q-- // ⌊a/(j+1)⌋
	}
	return min(max(q, -momentOne), momentOne)
}

// levelZ returns z = 2x−1 at the midpoint of offset level x, in the scale
// momentOne.
func levelZ(x int64) int64 { return 4*x + 2 - momentOne }

// momentsWeight returns the estimate of the units, of w in a closed
// sub-window with means m[1..d], still inside the period, with p the
// polynomials' values at the current offset level (see legendre).
func momentsWeight(w int64, m *[sluice.MaxMoments + 1]int64, p *[sluice.MaxMoments + 2]int64, d int) int64 {
	if w == 0 {
		return 0
	}
	// t/(2·momentOne·meanOne) is the share of w still inside.
	t := meanOne * (momentOne - p[1])
	for j := 1; j <= d; j++ {
		t += (p[j-1] - p[j+1]) * m[j]
	}
	const whole = 2 * momentOne * meanOne
	t = min(max(t, 0), whole)
	return (w*t + whole/2) / whole
}

// closedMean rounds the sum of a sub-window's w arrivals' values to a mean
// of one signed byte.
func closedMean(sum, w int64) int64 {
	if w == 0 {
		return 0
	}
	return min(max(floorDiv(2*sum*meanOne+w*momentOne, 2*w*momentOne), -127), 127)
}

// meansOf loads the means of sub-window j into m: its stored bytes, or for
// the current one the rounding of its sums that closing it will store.
func (s *SlidingMoments) meansOf(j int, m *[sluice.MaxMoments + 1]int64) {
	if j == int(s.i) {
		w := s.count(j)
		for x := 1; x <= int(s.d); x++ {
			m[x] = closedMean(s.sumAt(x), w)
		}
		return
	}
	for x := 1; x <= int(s.d); x++ {
		m[x] = s.mean(j, x)
	}
}

// close stores the current sub-window's means and clears its sums.
func (s *SlidingMoments) close() {
	w, i := s.count(int(s.i)), int(s.i)
	base := 2*(int(s.k)+1) + i*int(s.d)
	for m := 1; m <= int(s.d); m++ {
		s.buf()[base+m-1] = byte(int8(closedMean(s.sumAt(m), w)))
		s.setSum(m, 0)
	}
}

// add counts c more units at the current offset (p its polynomials'
// values) and returns how many were counted, fewer at the count's bound.
func (s *SlidingMoments) add(c int64, p *[sluice.MaxMoments + 2]int64) int64 {
	i := int(s.i)
	before := s.count(i)
	added := min(before+c, maxMomentCount) - before
	s.setCount(i, before+added)
	for m := 1; m <= int(s.d); m++ {
		s.setSum(m, s.sumAt(m)+added*p[m])
	}
	return added
}

// units returns the units of all the state's sub-windows.
func (s *SlidingMoments) units() int64 {
	var n int64
	if s.n != 0 {
		for j := range int(s.k) + 1 {
			n += s.count(j)
		}
	}
	return n
}

// roll moves the state to the sub-window that holds now, of length g, k
// per period with d means, and returns its index.
func (s *SlidingMoments) roll(now, g, k int64, d int) int {
	// Start%g: a tag shared by another length (once in 65536) whose
	// sub-windows Start is not aligned to goes the slow way, as Redis's
	// script, which compares the length itself, does.
	if int64(s.k) != k || int(s.d) != d || s.tag != gTag(g) || now < s.Start || s.n == 0 || s.Start%g != 0 {
		return s.rollSlow(now, g, k, d)
	}
	e := now - s.Start
	if e < g {
		return int(s.i)
	}
	s.close()
	if e >= (k+1)*g {
		// More than k sub-windows have passed: none weighs, unless the
		// clock stepped back more than a period and has come forward again
		// before the units counted then stop weighing (a hold, see
		// setUntil): those are kept, pinned.
		var held int64
		if s.Until > now {
			held = s.units()
		}
		clear(s.buf())
		s.pin = 0
		n := floorDiv(now, g)
		s.Start, s.i = n*g, uint8(slot(n, k))
		s.addAtEnd(held)
		return int(s.i)
	}
	i := int(s.i)
	for e >= g {
		if i++; int64(i) > k {
			i = 0
		}
		s.setCount(i, 0)
		if int(s.pin) == i+1 {
			s.pin = 0
		}
		s.Start += g
		e -= g
	}
	s.i = uint8(i)
	return i
}

// rollSlow is roll for a fresh key, a new k, d or g, or a clock gone back.
//
// A reading up to a period before the current sub-window's start, k, d and
// g as they were, stays in it and is decided at its start (elapsed clamps
// at 0): moving back would pin its units in an earlier sub-window, which
// a clock coming forward again would drop. Otherwise it lays the buffer out
// for k and d and keeps every unit counted, in the current sub-window,
// pinned (addAtEnd). Conservative: nothing counted is forgotten, some is
// counted longer. A clock gone back more than a period keeps Until where
// it was, a hold: until then a roll forward past the period keeps every
// unit rather than dropping them.
func (s *SlidingMoments) rollSlow(now, g, k int64, d int) int {
	same := s.n != 0 && int64(s.k) == k && int(s.d) == d && s.tag == gTag(g) && s.Start%g == 0
	if same && s.Until != 0 && now < s.Start && now >= s.Start-k*g {
		return int(s.i)
	}
	if !same {
		s.Until = 0 // a new layout: no hold
	}
	total := s.units()
	n := floorDiv(now, g)
	size := momentsSize(k, d)
	if int(s.c) >= size {
		s.n = uint8(size)
		clear(s.buf())
	} else {
		// Grown to its allocation's size class, which Bytes reports.
		s.setBuf(slices.Grow([]byte(nil), size)[:size])
	}
	s.k, s.d, s.i, s.tag, s.Start = uint8(k), uint8(d), uint8(slot(n, k)), gTag(g), n*g
	s.pin = 0
	s.addAtEnd(total)
	return int(s.i)
}

// addAtEnd counts units in the current sub-window as arrived at its end,
// and pins it: they count whole until it leaves the period (a least-squares
// fit of units all at the end would give some back early).
func (s *SlidingMoments) addAtEnd(units int64) {
	if units <= 0 {
		return
	}
	s.pin = s.i + 1
	var p [sluice.MaxMoments + 2]int64
	legendre(levelZ(offsetLevels-1), int(s.d), &p)
	s.add(units, &p)
}

// setUntil records when the state becomes fresh again: the newest
// sub-window with units weighs until a whole period after its end. An
// Until beyond that, a whole period after the current sub-window's end, is
// a hold (rollSlow) and is kept while the state counts anything.
func (s *SlidingMoments) setUntil(i int, g, k int64) {
	hold := s.Until
	if hold <= s.Start+(k+1)*g {
		hold = 0
	}
	s.Until = 0
	for m := range k + 1 {
		if s.count(back(i, m, k)) != 0 {
			s.Until = max(s.Start-m*g+g+k*g, hold)
			return
		}
	}
}

// level returns the offset level of an instant e nanoseconds into a
// sub-window of g.
func level(e, g int64) int64 { return mulDiv(e, offsetLevels, g) }

// Take decides a request of cost units at now and spends them if admitted.
// With lim.CountRejected a rejected request is counted too.
func (s *SlidingMoments) Take(now int64, lim sluice.Limit, cost int) sluice.Result {
	return s.TakePrepared(now, lim, s.Prepare(lim), cost)
}

// TakePrepared is Take with g = Prepare(lim), the sub-window's length.
func (s *SlidingMoments) TakePrepared(now int64, lim sluice.Limit, g int64, cost int) sluice.Result {
	k, d := bucketsOf(lim), int(lim.Moments)
	i := s.roll(now, g, k, d)
	var p [sluice.MaxMoments + 2]int64
	weighted, whole := s.weigh(now, g, k, d, i, &p)
	rate, c := int64(lim.Rate), int64(cost)
	var res sluice.Result
	if weighted+whole+c > rate {
		if lim.CountRejected {
			// Counted first, so that RetryAfter includes it.
			whole += s.add(c, &p)
		}
		res.RetryAfter = time.Duration(s.retryAfter(now, g, k, d, i, whole, rate, c))
	} else {
		whole += s.add(c, &p)
		res.Allowed = true
	}
	s.setUntil(i, g, k)
	res.Remaining = int(max(rate-weighted-whole, 0))
	res.ResetAfter = time.Duration(max(s.Until-now, 0))
	return res
}

// weigh returns the estimate at now of a state rolled to sub-window i: the
// oldest sub-window's weight and the units of the k counted whole. It
// fills p with the polynomials' values at now's offset (d > 0).
func (s *SlidingMoments) weigh(now, g, k int64, d, i int, p *[sluice.MaxMoments + 2]int64) (weighted, whole int64) {
	for m := range k {
		whole += s.count(back(i, m, k))
	}
	old := back(i, k, k)
	oldest, e := s.count(old), max(now-s.Start, 0) // before Start: the clock stepped back (rollSlow)
	switch {
	case int(s.pin) == old+1:
		weighted = oldest
		legendre(levelZ(level(e, g)), d, p)
	case d == 0:
		weighted = oldWeight(oldest, g-e, g, k)
	default:
		legendre(levelZ(level(e, g)), d, p)
		if oldest != 0 {
			var m [sluice.MaxMoments + 1]int64
			s.meansOf(old, &m)
			weighted = momentsWeight(oldest, &m, p, d)
		}
	}
	return weighted, whole
}

// The retry search's grid: retryGrid levels retryStride apart, whose
// polynomials' values are tabled (P_j does not depend on how many follow
// it). The search takes the stretches between them one by one.
const (
	retryGrid   = 16
	retryStride = offsetLevels / retryGrid
)

var gridLegendre = func() (t [retryGrid][sluice.MaxMoments + 2]int64) {
	for i := range t {
		legendre(levelZ(int64(i)*retryStride), sluice.MaxMoments, &t[i])
	}
	return t
}()

// momentsErr bounds legendre's rounding: |p_j − momentOne·P_j(z)| ≤
// momentsErr[j] at every offset level (measured at all 2^13 levels and
// rounded up: TestMomentsErrBound).
var momentsErr = [sluice.MaxMoments + 2]int64{0, 0, 1, 2, 2, 3, 4, 6, 6, 7}

// retryAfter returns the time from now until a request of cost c fits,
// assuming nothing else is spent: in the current sub-window (at index i,
// whole the units counted whole) or one of the next k+1, as sub-windows
// leave the period one by one. By the (k+1)-th nothing counted weighs.
func (s *SlidingMoments) retryAfter(now, g, k int64, d int, i int, whole, rate, c int64) int64 {
	for step := int64(0); step <= k+1; step++ {
		j, oldest := -1, int64(0)
		switch {
		case step == 0:
			j = back(i, k, k)
			oldest = s.count(j)
		case step <= k:
			// One sub-window later: the oldest has left, and the oldest of
			// those counted whole is counted in part.
			j = back(i, k-step, k)
			oldest = s.count(j)
			whole -= oldest
		}
		room := rate - c - whole
		if room < 0 {
			continue
		}
		base := s.Start + step*g
		from := base // the earliest instant considered in this sub-window
		if step == 0 {
			from = max(now, base) // before Start: the clock stepped back
		}
		if oldest <= room {
			return max(from-now, 1)
		}
		if at, ok := s.fitsFrom(j, oldest, room, base, from, g, k, d); ok {
			return max(at-now, 1)
		}
	}
	return g * (k + 1) // not reached: after k+1 sub-windows nothing weighs
}

// fitsFrom returns the earliest instant from from on, in the sub-window
// that begins at base, at which the oldest sub-window's weight (j, w) is
// at most room, or false if there is none. It is exact: the first instant
// at which a decision finds the weight within room.
func (s *SlidingMoments) fitsFrom(j int, w, room, base, from, g, k int64, d int) (int64, bool) {
	if int(s.pin) == j+1 {
		return 0, false // w counts whole until the sub-window is over
	}
	if d == 0 {
		// As SlidingBuckets.retryAfter: the weight falls linearly.
		e := oldWeightWithin(w, room, g, k)
		if e >= g {
			return 0, false
		}
		return max(base+e, from), true
	}
	f := fitSearch{w: w, g: g, d: d}
	s.meansOf(j, &f.m)
	f.prepare(room)
	// The search runs over the instants at which a decision can differ:
	// the first of each level, or every nanosecond of a sub-window shorter
	// than its levels.
	n, u := min(g, offsetLevels), from-base
	if g >= offsetLevels {
		u = level(u, g)
	}
	if u = f.first(u, n-1); u < 0 {
		return 0, false
	}
	if g >= offsetLevels {
		return max(base+mulDivCeil(u, g, offsetLevels), from), true
	}
	return base + u, true
}

// fitSearch finds the first offset at which a closed sub-window's weight
// is within a room: exactly, yet without evaluating every level, since a
// bound shows most of the sub-window out (10 to 21 evaluations per refusal
// in BenchmarkTakeMoments, where a scan would take up to 8,192).
//
// It works on t, the numerator of momentsWeight's share (t/whole), before
// the clamp: the weight is within room exactly when t ≤ T. The same sum
// over the exact polynomials is within e of t (legendre's rounding,
// momentsErr). Its slope in levels, −4·Σ_{j=0..d} (2j+1)·m_j·P_j(z) with
// m_0 = meanOne (as P'_{j+1} − P'_{j−1} = (2j+1)·P_j), is at most l in
// magnitude; its second derivative at most h/momentOne (|P'_j| ≤ j(j+1)/2).
// So between two levels r apart where t is ta and tb, t is at least
//
//	max((ta + tb − l·r)/2, min(ta, tb) − h·r²/(8·momentOne)) − 2e
//
// and a stretch whose bound is above T holds no level that fits.
type fitSearch struct {
	w, g int64
	d    int
	m    [sluice.MaxMoments + 1]int64
	// T is the most t may be; e, l and h the bounds above.
	T, e, l, h int64
}

// prepare sets the search's bounds for room.
func (f *fitSearch) prepare(room int64) {
	const whole = 2 * momentOne * meanOne
	f.T = ((room+1)*whole - whole/2 - 1) / f.w
	f.e, f.l, f.h = 0, 4*meanOne, 0
	for j := int64(1); j <= int64(f.d); j++ {
		a := abs(f.m[j])
		f.e += a * (momentsErr[j-1] + momentsErr[j+1])
		f.l += 4 * (2*j + 1) * a
		f.h += 8 * (2*j + 1) * j * (j + 1) * a
	}
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// level returns the level a decision reads at search index u.
func (f *fitSearch) level(u int64) int64 {
	if f.g >= offsetLevels {
		return u
	}
	return level(u, f.g)
}

// t returns t at search index u.
func (f *fitSearch) t(u int64) int64 {
	var p [sluice.MaxMoments + 2]int64
	if f.g >= offsetLevels && u%retryStride == 0 {
		p = gridLegendre[u/retryStride]
	} else {
		legendre(levelZ(f.level(u)), f.d, &p)
	}
	t := meanOne * (momentOne - p[1])
	for j := 1; j <= f.d; j++ {
		t += (p[j-1] - p[j+1]) * f.m[j]
	}
	return t
}

// first returns the first index in [a, b] at which the weight fits, or
// −1: it tries a, then each stretch between the grid's points.
func (f *fitSearch) first(a, b int64) int64 {
	ta := f.t(a)
	if ta <= f.T {
		return a
	}
	for a < b {
		c := min((a/retryStride+1)*retryStride, b)
		tc := f.t(c)
		if u := f.within(a, ta, c, tc); u >= 0 {
			return u
		}
		a, ta = c, tc
	}
	return -1
}

// within returns the first index in (a, b] at which the weight fits, or
// −1, given t there: ta, above T, and tb.
func (f *fitSearch) within(a, ta, b, tb int64) int64 {
	r := f.level(b) - f.level(a)
	if bound := max((ta+tb-f.l*r)>>1, min(ta, tb)-(f.h*r*r+8*momentOne-1)/(8*momentOne)); bound-2*f.e > f.T {
		return -1
	}
	if b-a == 1 {
		if tb <= f.T {
			return b
		}
		return -1
	}
	c := a + (b-a)/2
	tc := f.t(c)
	if u := f.within(a, ta, c, tc); u >= 0 {
		return u
	}
	return f.within(c, tc, b, tb) // tc > T: else the first found it
}

// Peek reports the estimate at now without spending: ResetAfter is the time
// until no counted unit weighs on it, 0 for a fresh key.
func (s *SlidingMoments) Peek(now int64, lim sluice.Limit) sluice.Result {
	var buf [momentsMaxSize]byte
	c := s.copyInto(&buf)
	return c.Take(now, lim, 0)
}

// copyInto returns a copy of the state whose buffer is buf, so that
// deciding on the copy changes nothing of s and, buf being the caller's
// local, allocates nothing.
func (s *SlidingMoments) copyInto(buf *[momentsMaxSize]byte) SlidingMoments {
	c := *s
	c.p, c.c = &buf[0], uint8(len(buf))
	copy(c.buf(), s.buf())
	return c
}

// momentsMaxSize is the largest buffer a state has.
const momentsMaxSize = (sluice.MaxBuckets+1)*(2+sluice.MaxMoments) + 4*sluice.MaxMoments

// Refund gives cost units back to the current sub-window. Which of its
// units they were is not known, so its means stay as they were: its sums
// are scaled by after/before (rounded down), rather than the units taken
// away at the current offset, which would leave the rest looking earlier
// than they came and the estimate low once the sub-window is the oldest.
func (s *SlidingMoments) Refund(now int64, lim sluice.Limit, cost int) {
	g, k, d := s.Prepare(lim), bucketsOf(lim), int(lim.Moments)
	i := s.roll(now, g, k, d)
	before := s.count(i)
	after := max(before-int64(cost), 0)
	s.setCount(i, after)
	if after == 0 && int(s.pin) == i+1 {
		s.pin = 0 // nothing left to pin: as a fresh sub-window
	}
	if after != before {
		for m := 1; m <= d; m++ {
			// |sum| ≤ before·momentOne < 2^31: the product is below 2^47,
			// exact in a Lua number, as the script computes it.
			s.setSum(m, floorDiv(s.sumAt(m)*after, before))
		}
	}
	s.setUntil(i, g, k)
}

// Expires returns the instant from which no counted unit weighs on the
// estimate any more.
func (s *SlidingMoments) Expires() int64 { return s.Until }

// Prepare returns the length of a sub-window, Period/Buckets.
func (*SlidingMoments) Prepare(lim sluice.Limit) int64 {
	return int64(lim.Period) / bucketsOf(lim)
}

// Bytes returns the heap bytes of the state's buffer.
func (s *SlidingMoments) Bytes() int { return int(s.c) }

// Units returns the units the state counts in all its sub-windows: what an
// evicted key leaves behind.
func (s *SlidingMoments) Units() int64 { return s.units() }

// Estimate returns the units the state counts at now under its own layout
// (its sub-windows and means, of lim.Period), what Take compares with the
// rate, without changing the state: 0 for a fresh key, and none of the
// units of sub-windows that have left the period. A store that moves a key
// to the two-window counter seeds it with this, so that the counter
// forgets nothing the moments still count and counts nothing they let go.
// A period whose sub-window length is not the state's keeps every unit.
func (s *SlidingMoments) Estimate(now int64, lim sluice.Limit) int64 {
	if s.n == 0 {
		return 0
	}
	var buf [momentsMaxSize]byte
	c := s.copyInto(&buf)
	lim.Buckets, lim.Moments = s.k, s.d
	g, k, d := c.Prepare(lim), bucketsOf(lim), int(s.d)
	i := c.roll(now, g, k, d)
	var p [sluice.MaxMoments + 2]int64
	weighted, whole := c.weigh(now, g, k, d, i, &p)
	return weighted + whole
}

// Restore makes the state one that counts units in the sub-window that
// holds now under lim, whole until it leaves the period: at least as spent
// as any state whose sub-windows held them. It is for a key rebuilt from what an
// evicted one left.
func (s *SlidingMoments) Restore(now int64, lim sluice.Limit, units int64) {
	s.Take(now, lim, 0)
	s.addAtEnd(units)
	s.setUntil(int(s.i), s.Prepare(lim), bucketsOf(lim))
}
