// Package algorithm holds the five rate limiting algorithms as pure state
// transitions: each is a small state type whose Take method decides one
// request at an injected instant and updates the state in place.
//
// Instants are int64 nanoseconds since the Unix epoch; window algorithms
// align their windows to the epoch. Nothing here locks, allocates on a
// decision (the sliding log grows its ring up to the entries its limit needs
// and then stops),
// reads the clock, performs I/O or logs: stores own the state, the locking
// and the time.
//
// Every Take assumes its input passed sluice.Check: a valid limit and a cost
// between 1 and the limit's capacity. Every state's zero value is a fresh key.
// Expires reports the instant from which the state is indistinguishable from
// the zero value, so that a store may drop it.
package algorithm

import "math/bits"

// mulDiv returns floor(a·b/c) for non-negative a, b and positive c, computed
// with a 128-bit intermediate. The result must fit in int64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1 // saturate rather than panic; callers bound their inputs
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(q)
}

// mulDivCeil returns ceil(a·b/c) for non-negative a, b and positive c.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return int64(q)
}

// windowStart returns the start of the epoch-aligned window of length p that
// holds now.
func windowStart(now, p int64) int64 { return floorDiv(now, p) * p }

// floorDiv returns ⌊a/b⌋ for positive b.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv returns ⌈a/b⌉ for positive b.
func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }
