package algorithm

import "github.com/sluicehq/sluice"

// Decider is the method set every algorithm's state has, so that a store or
// a simulator holds the states of any algorithm with one generic code path
// and a new algorithm needs no per-algorithm code outside its own file
// (beyond one registration line per store). A nil pointer of the state type
// answers Prepare; every other method needs a state, whose zero value is a
// fresh key.
type Decider interface {
	// Prepare returns the constant the algorithm derives from lim by a
	// division (a token bucket's emission interval, a leaky bucket's
	// milli-rate), or 0 if it derives none. It reads no state, so a store
	// that sees one limit many times may call it once and pass the result
	// to TakePrepared.
	Prepare(lim sluice.Limit) int64
	// TakePrepared is Take with prepared = Prepare(lim).
	TakePrepared(now int64, lim sluice.Limit, prepared int64, cost int) sluice.Result
	// Take decides a request of cost units at now and spends them if
	// admitted.
	Take(now int64, lim sluice.Limit, cost int) sluice.Result
	// Refund gives cost units back at now, never beyond a fresh key's.
	Refund(now int64, lim sluice.Limit, cost int)
	// Expires returns the instant from which the state is indistinguishable
	// from a fresh key's.
	Expires() int64
	// Bytes returns the heap bytes the state holds beyond its own value (a
	// sliding log's ring of entries); 0 for fixed-size states.
	Bytes() int
}

// State constrains a type parameter to a pointer to an algorithm's state
// type S, for generic code that holds S by value (in a slice or a hash
// table) and calls its methods through *S.
type State[S any] interface {
	*S
	Decider
}

var (
	_ Decider = (*TokenBucket)(nil)
	_ Decider = (*FixedWindow)(nil)
	_ Decider = (*SlidingWindow)(nil)
	_ Decider = (*SlidingLog)(nil)
	_ Decider = (*LeakyBucket)(nil)
)
