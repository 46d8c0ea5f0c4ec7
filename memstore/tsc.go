package memstore

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// tscClock reads the exact clock through the CPU's time-stamp counter, one
// instruction, instead of the kernel's clock_gettime, which on the guests
// of BENCHMARKS.md reads the same counter and costs two to three times as
// much (time.Since 99–124 ns, the counter alone 40–54 ns, at a load of 17).
// It is used only where the kernel itself keeps time with the counter (the
// clocksource is "tsc": an invariant counter, in step across CPUs), so that
// both read one source and differ only in the factor that turns ticks into
// nanoseconds, which this clock calibrates against the monotonic clock.
//
// How: an anchor pairs a counter reading with the midpoint of two
// monotonic reads taken around it, at most maxPairNS apart (so the pair is
// off by at most half that). A reading is the last anchor's nanoseconds
// plus the ticks since it, times a rate measured over a baseline that ends
// at the last anchor and runs one to two seconds back (20 ms at first), so
// that the rate follows the kernel's as NTP slews it. A reading more than
// spanNS after its anchor (or before it) takes a new anchor and returns the
// monotonic reading itself: at most one monotonic read per spanNS of
// decisions, and a decision at least every spanNS pays one. Until the
// clock has measured two rates that agree (within 1/4096), each over
// calibrationNS, every reading is monotonic.
//
// The error, against the monotonic clock: at most maxPairNS/2 from the
// anchor, plus the rate's error over at most spanNS, which is at most
// maxPairNS/calibrationNS of it (100 ns), 1 ppm of it (1 ns) once the
// baseline is a second long: 600 ns at worst while the kernel's rate holds
// (TestTSCClockWithinBoundOfMonotonic checks that bound). That is the order
// of one read of the monotonic clock, which is stale by its own duration
// when the caller sees it.
//
// NTP changes the kernel's rate, and not only within ±500 ppm: after a
// large offset chrony slews at up to 83,333 ppm. Each anchor checks the
// last one's prediction: with the rate held it is off by at most 2·maxPairNS
// plus the rate's error over the gap between them, so a prediction off by
// more means the rate changed (or the counter jumped), and the clock
// calibrates afresh from this anchor, reading the monotonic clock for the
// two passes (TestTSCClockFollowsTheKernelsSlewChange). The honest bound
// while the rate changes: the readings of the span in which it changed are
// off by the change over that span (10 µs for 1%, 83 µs at chrony's
// fastest slew), once; a change too small to be caught (2000 ppm was
// caught, 1500 ppm was not and left readings 1.4 µs off) leaves readings
// off by at most about 3.5 µs (maxPairNS/2 plus the prediction's slack
// over a span) while the baseline catches up, one to two seconds. A new anchor may step a reading back by
// as much; the algorithms decide a reading before their window's start in
// that window, and a token bucket keeps the later of its TAT and now.
//
// The wall clock: like the store's monotonic clock, this one is anchored to
// the wall clock once, when the store is made (Store.base); a step of the
// wall clock after that (NTP, an operator) moves no reading. If the counter
// itself jumps (a virtual machine restored or moved to another host) an
// anchor finds its prediction off the monotonic clock (by more than the
// slack above, and at most jumpNS) and calibrates afresh from that anchor,
// reading the monotonic clock meanwhile. Until that anchor, at most spanNS of ticks after the jump, a
// reading is off by the jump (a jump back, or one forward by more than a
// span, is caught at once). Two jumps within one calibration, in
// proportion to its two passes, would pass for a rate: off until the next
// anchor by the rate's error over a span, then caught.
//
// Concurrency: readers load the anchor under a sequence count (odd while an
// anchor is written) and never block; the one that finds the anchor stale
// takes the sequence count by compare-and-swap and writes the next, and
// readers that lose that race read the monotonic clock. Nothing allocates.
type tscClock struct {
	_    [64]byte // off the cache lines of the Store's other fields
	seq  atomic.Uint64
	tick atomic.Int64 // the anchor's counter reading
	ns   atomic.Int64 // its monotonic reading, Unix nanoseconds
	rate atomic.Int64 // nanoseconds per tick, 32.32 fixed point; 0 while calibrating
	span atomic.Int64 // ticks a reading may extrapolate: spanNS at rate
	_    [24]byte

	// Written only by the holder of an odd seq.
	t0, n0  int64        // the baseline's first anchor; n0 == 0: none yet
	t1, n1  int64        // the next baseline's first anchor; n1 == 0: none yet
	tc, nc  int64        // while calibrating, the first rate's last anchor; nc == 0: none yet
	rc      int64        // the rate from (t0, n0) to (tc, nc)
	read    func() int64 // the counter
	mono    func() int64 // the monotonic clock, Unix nanoseconds
	maxPair int64        // maxPairNS, but in benchmarks run under valgrind
}

const (
	spanNS        = int64(time.Millisecond)      // the longest extrapolation from an anchor
	calibrationNS = int64(10 * time.Millisecond) // the shortest baseline a rate is measured over
	baselineNS    = int64(time.Second)           // baselines run from one to two of these
	maxPairNS     = int64(time.Microsecond)      // the widest pair of monotonic reads an anchor accepts
	jumpNS        = int64(20 * time.Microsecond) // a prediction off by more: the counter jumped, whatever the slack
)

// newTSCClock returns a clock over the counter read and the monotonic
// clock mono, not yet calibrated.
func newTSCClock(read, mono func() int64) *tscClock {
	return &tscClock{read: read, mono: mono, maxPair: maxPairNS}
}

// at returns the instant of counter reading t: extrapolated from the
// anchor, or the monotonic clock's reading when t is not within span of
// the anchor, an anchor is being written, or the clock is calibrating.
func (c *tscClock) at(t int64) int64 {
	seq := c.seq.Load()
	a, n, r, span := c.tick.Load(), c.ns.Load(), c.rate.Load(), c.span.Load()
	if d := t - a; uint64(d) < uint64(span) && seq&1 == 0 && c.seq.Load() == seq {
		return n + int64(uint64(d)*uint64(r)>>32)
	}
	return c.anchor()
}

// anchor reads the monotonic clock and returns the reading; if no other
// goroutine is anchoring, it first pairs the reading with the counter and
// publishes the new anchor (and rate) once calibrated.
func (c *tscClock) anchor() int64 {
	n1 := c.mono()
	seq := c.seq.Load()
	if seq&1 != 0 || !c.seq.CompareAndSwap(seq, seq+1) {
		return n1 // another goroutine anchors; its anchor serves the next reading
	}
	t := c.read()
	n2 := c.mono()
	defer c.seq.Store(seq + 2)
	if n2-n1 > c.maxPair || n2 < n1 {
		return n2 // preempted between the reads: no anchor from this pair
	}
	n := n1 + (n2-n1)/2
	if c.n0 != 0 && c.rate.Load() != 0 {
		// Did the counter jump, or the kernel's rate change? Predict n
		// from the last anchor: with the rate held, the prediction is off
		// by at most the two pairs' halves and the rate's error over the
		// gap, which its baseline bounds.
		// (A pair wider than jumpNS, allowed only under valgrind, leaves
		// jumpNS alone as before.)
		a, na := c.tick.Load(), c.ns.Load()
		pred := na + scale(t-a, c.rate.Load())
		pair, gap := min(c.maxPair, jumpNS), min(max(n-na, 0), 1<<40)
		tol := min(2*pair+gap*pair/max(na-c.n0, 1), jumpNS)
		if d := pred - n; t < a || d > tol || d < -tol {
			c.n0 = 0 // calibrate afresh from this anchor
		}
	}
	if c.n0 == 0 || t <= c.t0 || (c.nc != 0 && t <= c.tc) {
		c.t0, c.n0, c.n1, c.nc = t, n, 0, 0
		c.span.Store(0) // every reading goes to the monotonic clock
		c.rate.Store(0)
		return n2
	}
	if c.rate.Load() == 0 {
		// Calibrating: a rate over the first calibrationNS, then one over
		// the next, which must agree with it, lest a jump of the counter
		// within either pass for a rate.
		if c.nc == 0 {
			if n-c.n0 >= calibrationNS {
				c.tc, c.nc, c.rc = t, n, rateOf(n-c.n0, t-c.t0)
			}
			return n2
		}
		if n-c.nc < calibrationNS {
			return n2
		}
		if r := rateOf(n-c.nc, t-c.tc); c.rc <= 0 || r-c.rc > c.rc>>12 || c.rc-r > c.rc>>12 {
			c.t0, c.n0, c.nc = t, n, 0 // they disagree: start again from here
			return n2
		}
	}
	// The baseline moves on by whole baselineNS: from (t1, n1), marked
	// baselineNS after (t0, n0), once that is baselineNS old in turn.
	switch {
	case c.n1 != 0 && n-c.n1 >= baselineNS:
		c.t0, c.n0, c.t1, c.n1 = c.t1, c.n1, t, n
	case c.n1 == 0 && n-c.n0 >= baselineNS:
		c.t1, c.n1 = t, n
	}
	r := rateOf(n-c.n0, t-c.t0)
	if r <= 0 {
		c.n0 = 0
		return n2
	}
	c.tick.Store(t)
	c.ns.Store(n)
	c.rate.Store(r)
	c.span.Store(max(spanNS<<32/r, 1))
	return n2
}

// rateOf returns ns/ticks in 32.32 fixed point, or 0 if it does not fit.
func rateOf(ns, ticks int64) int64 {
	hi, lo := uint64(ns)>>32, uint64(ns)<<32
	if hi >= uint64(ticks) {
		return 0
	}
	q, _ := bits.Div64(hi, lo, uint64(ticks))
	if q > 1<<62 {
		return 0
	}
	return int64(q)
}

// scale returns d ticks in nanoseconds at rate r (32.32 fixed point),
// for any d, positive or negative.
func scale(d, r int64) int64 {
	neg := d < 0
	if neg {
		d = -d
	}
	hi, lo := bits.Mul64(uint64(d), uint64(r))
	v := int64(hi<<32 | lo>>32)
	if hi>>31 != 0 {
		v = 1<<63 - 1
	}
	if neg {
		return -v
	}
	return v
}
