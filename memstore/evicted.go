package memstore

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// sketch remembers what the shard's evicted keys had spent, so that
// eviction never gives an allowance back: a key evicted while its state
// still said something (before its Expires) leaves in the sketch the
// instant its state would have become fresh and the units it held, and a
// key created later with the same hash starts from a state rebuilt from
// them, at least as spent as the one evicted (restore).
//
// Layout: a power of two of buckets of four cells of 16 bytes, one cache
// line each: a cuckoo filter's shape, with an instant and units beside
// each fingerprint. A key has a 32-bit fingerprint and two buckets, the
// second a function of the first and the fingerprint, so that a cell can
// move to its key's other bucket. A key merges into its own cell if it has
// one, else takes a free cell (one whose instant has passed) of the
// emptier bucket, else merges into a wildcard cell either bucket has, else
// moves other keys' cells to their other buckets (at most maxKicks) to
// free one. Only when that fails does it merge into its
// bucket's wildcard cell (fingerprint 0; a bucket turns its live cell that
// becomes fresh first into one): the latest instant and the most units of
// the keys merged there, which every key with that bucket matches. A
// lookup takes the latest instant and the most units of the live cells of
// its two buckets that carry its fingerprint or the wildcard. So a
// collision can only make a key look more spent, never less: a key
// matched by another's fingerprint (one chance in 2³¹ per cell) or by a
// wildcard starts as spent as the most spent of them, until their instant
// passes. Cells empty themselves when their instant passes; nothing sweeps
// them.
//
// The sketch's bytes are fixed when the store is made (sketchSize) and
// counted in the shard's budget from the start; its array is allocated at
// the first eviction it remembers, so that a store that never evicts never
// pays for it.
type sketch struct {
	buckets []sketchBucket // nil until the first remembered eviction
	n       uint64         // buckets the sketch has, allocated or not
	// remembered counts the evictions the sketch took in; merged those it
	// took into a wildcard (a sketch that keeps merging is saturated).
	remembered, merged uint64
}

// sketchCell is one evicted key's memory: until is the instant from which
// its state is fresh (the cell is free at or after it), fp its fingerprint
// or wildcard, units what it had spent, saturating at unitsSaturated.
type sketchCell struct {
	until int64
	fp    uint32
	units uint32
}

// sketchWays is the cells of a bucket: four of 16 bytes fill a cache line.
const sketchWays = 4

type sketchBucket [sketchWays]sketchCell

// sketchBucketBytes is the size of a bucket: the sketch's unit of memory.
const sketchBucketBytes = sketchWays * 16

const (
	wildcard = 0
	// unitsSaturated marks a count too large for a cell: restore reads it
	// as saturatedUnits, more than any limit admits.
	unitsSaturated = math.MaxUint32
	saturatedUnits = 1 << 60
)

// sketchShare is the share of a shard's byte budget its sketch takes: an
// eighth. At 16 bytes a cell against about 60 a key held, it remembers
// about three times as many evicted keys as that eighth would hold live.
const sketchShare = 8

// sketchSize returns the buckets of a shard's sketch for a shard bounded by
// maxBytes and maxKeys: the largest power of two that fits in an eighth of
// the bytes and in two cells per key the shard may hold (a store bounded
// by count gets a sketch in proportion to its keys), at least one.
func sketchSize(maxBytes int64, maxKeys int) uint64 {
	cells := min(maxBytes/sketchShare/(sketchBucketBytes/sketchWays), 2*int64(maxKeys))
	n := uint64(1)
	for n*2*sketchWays <= uint64(max(cells, 0)) {
		n *= 2
	}
	return n
}

// bytes returns the memory the sketch holds, counted whether or not it is
// allocated yet.
func (s *sketch) bytes() int64 { return int64(s.n) * sketchBucketBytes }

// fingerprint returns the 32 bits of h a cell keeps, never wildcard. It
// mixes h with a constant of its own, so that it does not follow the bits
// that pick the shard, the table slot or the bucket.
func fingerprint(h uint64) uint32 { return uint32((h*0xc2b2ae3d27d4eb4f)>>32) | 1 }

// home returns the first bucket of a key whose hash is h.
func (s *sketch) home(h uint64) uint64 { return (h * 0x94d049bb133111eb) >> 32 & (s.n - 1) }

// alt returns the other bucket of a key with fingerprint fp that has
// bucket i: a function of i and fp alone (partial-key cuckoo hashing), so
// that a cell can move to its key's other bucket without the key's hash.
func (s *sketch) alt(i uint64, fp uint32) uint64 {
	return i ^ uint64(fp)*0xbf58476d1ce4e5b9>>32&(s.n-1)
}

// maxKicks bounds the cells one remember moves to make room: past it, the
// key merges into a wildcard. So an eviction costs at most that many
// bucket scans.
const maxKicks = 32

// cellUnits returns what a cell's units stand for.
func cellUnits(u uint32) int64 {
	if u == unitsSaturated {
		return saturatedUnits
	}
	return int64(u)
}

// remember records that a key whose hash is h was evicted at now with a
// state that becomes fresh at until (after now) and held units.
func (s *sketch) remember(h uint64, now, until, units int64) {
	if s.buckets == nil {
		s.buckets = make([]sketchBucket, s.n)
	}
	s.remembered++
	u := uint32(unitsSaturated)
	if units < unitsSaturated {
		u = uint32(max(units, 0))
	}
	cur := sketchCell{until: until, fp: fingerprint(h), units: u}
	i1 := s.home(h)
	i2 := s.alt(i1, cur.fp)
	// The key's own cell, if it has one, or a free cell of the emptier of
	// its buckets.
	var free [2]*sketchCell
	var nfree [2]int
	var wild *sketchCell
	for j, i := range [2]uint64{i1, i2} {
		for k := range s.buckets[i] {
			switch c := &s.buckets[i][k]; {
			case c.until <= now:
				free[j] = c
				nfree[j]++
			case c.fp == cur.fp:
				c.until, c.units = max(c.until, until), max(c.units, u)
				return
			case c.fp == wildcard:
				wild = c
			}
		}
	}
	switch {
	case nfree[0] > 0 && nfree[0] >= nfree[1]:
		*free[0] = cur
		return
	case nfree[1] > 0:
		*free[1] = cur
		return
	case wild != nil:
		// A wildcard of its buckets matches the key already: the area is
		// saturated, and moving cells would cost maxKicks scans for nothing.
		s.merged++
		wild.until, wild.units = max(wild.until, until), max(wild.units, u)
		return
	}
	// Both full: move a cell to its other bucket, and so on, until one
	// lands in a free cell. Wildcards stay where they are.
	i, r := i1, h|1
	for range maxKicks {
		r ^= r << 13
		r ^= r >> 7
		r ^= r << 17
		b := &s.buckets[i]
		k := int(r % sketchWays)
		for n := 0; n < sketchWays && b[k].fp == wildcard; n++ {
			k = (k + 1) % sketchWays
		}
		if b[k].fp == wildcard {
			break // every cell a wildcard: merge here
		}
		cur, b[k] = b[k], cur
		i = s.alt(i, cur.fp)
		for k := range s.buckets[i] {
			switch c := &s.buckets[i][k]; {
			case c.until <= now:
				*c = cur
				return
			case c.fp == cur.fp: // another key's fingerprint: merging only adds
				c.until, c.units = max(c.until, cur.until), max(c.units, cur.units)
				return
			}
		}
	}
	// No room within maxKicks: cur merges into bucket i's wildcard, which
	// every key with bucket i (cur's key among them) matches; a bucket with
	// none turns its live cell that becomes fresh first into one.
	s.merged++
	b := &s.buckets[i]
	w := &b[0]
	for k := range b {
		if c := &b[k]; c.fp == wildcard {
			w = c
			break
		} else if c.until < w.until {
			w = c
		}
	}
	w.fp, w.until, w.units = wildcard, max(w.until, cur.until), max(w.units, cur.units)
}

// recall returns the latest instant and the most units of the live cells
// that match a key whose hash is h at now, and whether any does. With
// take it frees the key's own cell: the key is held again.
func (s *sketch) recall(h uint64, now int64, take bool) (until, units int64, ok bool) {
	if s.buckets == nil {
		return 0, 0, false
	}
	fp := fingerprint(h)
	i1 := s.home(h)
	for _, i := range [2]uint64{i1, s.alt(i1, fp)} {
		for k := range s.buckets[i] {
			c := &s.buckets[i][k]
			if c.until > now && (c.fp == fp || c.fp == wildcard) {
				until, units, ok = max(until, c.until), max(units, cellUnits(c.units)), true
				if take && c.fp == fp {
					*c = sketchCell{}
				}
			}
		}
	}
	return until, units, ok
}

// evictionFuncs returns, for the algorithm whose state is S, what an evicted
// state leaves in the sketch (until, the instant from which it is fresh,
// and the units it holds) and how a new key's state is rebuilt from a
// sketch's until and units under lim (prepared: Prepare(lim)), at now before
// until. Each rebuilt state is at least as spent as any state that leaves
// at most until and units, and grows no more spent as either falls, so
// that what a merged cell rebuilds is at least as spent as each key merged
// into it. A new algorithm adds its pair here; one it lacks panics when
// the store is made, which every test of the store does.
func evictionFuncs[S any]() (summary func(*S) (until, units int64), restore func(st *S, now int64, lim sluice.Limit, prepared, until, units int64)) {
	var sum, res any
	switch any((*S)(nil)).(type) {
	case *algorithm.TokenBucket:
		sum, res = summaryTokenBucket, restoreTokenBucket
	case *algorithm.FixedWindow:
		sum, res = summaryFixedWindow, restoreFixedWindow
	case *algorithm.SlidingWindow:
		sum, res = summarySlidingWindow, restoreSlidingWindow
	case *algorithm.SlidingBuckets:
		sum, res = summarySlidingBuckets, restoreSlidingBuckets
	case *algorithm.SlidingMoments:
		sum, res = summarySlidingMoments, restoreSlidingMoments
	case *algorithm.SlidingLog:
		sum, res = summarySlidingLog, restoreSlidingLog
	case *algorithm.LeakyBucket:
		sum, res = summaryLeakyBucket, restoreLeakyBucket
	default:
		panic(fmt.Sprintf("memstore: no eviction summary for %T (register it in evictionFuncs)", (*S)(nil)))
	}
	return sum.(func(*S) (int64, int64)), res.(func(*S, int64, sluice.Limit, int64, int64, int64))
}

// A token bucket is its TAT: restored exactly, a debt (ChargeN) included.
func summaryTokenBucket(s *algorithm.TokenBucket) (int64, int64) { return s.TAT, 0 }

func restoreTokenBucket(s *algorithm.TokenBucket, _ int64, _ sluice.Limit, _, until, _ int64) {
	s.TAT = until
}

// A fixed window is its end and count: restored exactly.
func summaryFixedWindow(s *algorithm.FixedWindow) (int64, int64) { return s.Expires(), s.Count }

func restoreFixedWindow(s *algorithm.FixedWindow, _ int64, _ sluice.Limit, _, until, units int64) {
	if units > 0 {
		s.End, s.Count = until, units
	}
}

// A sliding window leaves the units of both its windows; they come back
// whole in the window that holds now, the current one if they weigh past
// its end (so they weigh fully now, and then fade over the next window, no
// earlier than any of them did), else the previous one.
func summarySlidingWindow(s *algorithm.SlidingWindow) (int64, int64) {
	return s.Until, s.Prev + s.Curr
}

func restoreSlidingWindow(s *algorithm.SlidingWindow, now int64, lim sluice.Limit, _, until, units int64) {
	if units <= 0 {
		return
	}
	p := int64(lim.Period)
	w := now - now%p
	if now%p < 0 {
		w -= p
	}
	s.Start = w
	if until <= w+p {
		s.Prev, s.Until = units, w+p
	} else {
		s.Curr, s.Until = units, w+2*p
	}
}

// A sliding window with buckets leaves the units of all its sub-windows;
// they come back whole in the sub-window that holds now, where they weigh
// fully for a period and then fade: no earlier than any of them did.
func summarySlidingBuckets(s *algorithm.SlidingBuckets) (int64, int64) {
	var units int64
	for _, c := range s.Counts {
		units += int64(c)
	}
	return s.Until, units
}

func restoreSlidingBuckets(s *algorithm.SlidingBuckets, now int64, lim sluice.Limit, g, _, units int64) {
	if units <= 0 {
		return
	}
	// An empty take under lim sets Start, K and Until to a fresh key's at
	// now; the units then go into the current sub-window.
	s.Take(now, lim, 0)
	k := int64(lim.Buckets)
	i := s.Start / g % (k + 1) // Start is a multiple of g
	if i < 0 {
		i += k + 1
	}
	s.Counts[i] = uint32(min(units, math.MaxUint32))
	s.Until = s.Start + g + int64(lim.Period)
}

// A sliding window with moments leaves the units of all its sub-windows;
// they come back whole in the sub-window that holds now, as arrived at its
// end (algorithm.SlidingMoments.Restore): they weigh fully for a period and
// then fade, no earlier than any of them did.
func summarySlidingMoments(s *algorithm.SlidingMoments) (int64, int64) {
	return s.Until, s.Units()
}

func restoreSlidingMoments(s *algorithm.SlidingMoments, now int64, lim sluice.Limit, _, _, units int64) {
	if units > 0 {
		s.Restore(now, lim, units)
	}
}

// A sliding log leaves its units and the instant its newest entry leaves
// the window; they come back as one entry at the newest entry's instant
// (no later than now), so that none leaves earlier than it would have.
func summarySlidingLog(s *algorithm.SlidingLog) (int64, int64) {
	return s.Expires(), int64(s.Len())
}

func restoreSlidingLog(s *algorithm.SlidingLog, now int64, lim sluice.Limit, _, until, units int64) {
	c := min(units, int64(lim.Rate))
	if c <= 0 {
		return
	}
	s.Take(min(until-int64(lim.Period), now), lim, int(c))
}

// A leaky bucket leaves the instant it has drained empty; it comes back at
// the level that drains by then (rounded up, at most a full bucket).
func summaryLeakyBucket(s *algorithm.LeakyBucket) (int64, int64) { return s.Until, 0 }

func restoreLeakyBucket(s *algorithm.LeakyBucket, now int64, lim sluice.Limit, rate, until, _ int64) {
	nowMs := now / 1e6
	if now%1e6 < 0 {
		nowMs--
	}
	dt := (until-1)/1e6 + 1 - nowMs // ms until it has drained, rounded up
	full := uint64(lim.Burst) * 1000
	lvl := full
	// ⌈dt·rate/1000⌉ milli-requests, in 128 bits: both may be large.
	if hi, lo := bits.Mul64(uint64(max(dt, 0)), uint64(rate)); hi < 1000 {
		q, r := bits.Div64(hi, lo, 1000)
		if r != 0 {
			q++
		}
		lvl = min(q, full)
	}
	if lvl == 0 {
		return
	}
	s.Excess, s.Last, s.Until = int64(lvl)-1000, nowMs, until
}
