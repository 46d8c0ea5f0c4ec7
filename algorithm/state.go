package algorithm

import (
	"unsafe"

	"github.com/sluicehq/sluice"
)

// Decider is the method set every algorithm's state has, so that stores and
// the simulator handle the states of any algorithm with one generic code
// path, and a new algorithm is its own file plus a registration line or
// three in each consumer (docs/architecture.md lists them). A nil pointer of
// the state type answers Prepare; every other method needs a state, whose
// zero value is a fresh key.
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
	// Peek returns what a decision of cost 0 at now would (see
	// sluice.Peeker): Allowed unless the state is over lim, Remaining and
	// ResetAfter as a Take at now would report them, RetryAfter zero when
	// Allowed. It never changes the state.
	Peek(now int64, lim sluice.Limit) sluice.Result
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

// States holds the states of a fixed number of keys under one limit, by
// index, in one slice: a simulator's or a test's store, without a hash
// table or locks. The zero States is not usable; see NewStates.
type States interface {
	// Len returns the number of keys.
	Len() int
	// At returns the state of key i, for 0 ≤ i < Len(). The pointer inside
	// stays valid for the life of the States.
	At(i int) Decider
	// Size returns the bytes of one state held by value, as unsafe.Sizeof
	// reports them; a state's heap beyond that is its Bytes.
	Size() int
	// Limit returns the limit the states are decided under, and the
	// algorithm's Prepare of it.
	Limit() (lim sluice.Limit, prepared int64)
	// Take is At(i).TakePrepared(now, Limit(), cost) and then At(i).Bytes(),
	// in one call: a simulator's step.
	Take(i int, now int64, cost int) (res sluice.Result, bytes int)
}

// registry makes the States of each algorithm, indexed by sluice.Algorithm:
// the algorithm package's one line per algorithm, which also checks at
// compile time that the state has every Decider method.
var registry = [...]func(lim sluice.Limit, n int) States{
	sluice.TokenBucket:   newStates[TokenBucket],
	sluice.FixedWindow:   newStates[FixedWindow],
	sluice.SlidingWindow: newStates[SlidingWindow],
	sluice.SlidingLog:    newStates[SlidingLog],
	sluice.LeakyBucket:   newStates[LeakyBucket],
}

// NewStates returns n fresh states of lim's algorithm, decided under lim,
// or nil if lim.Algorithm is not an algorithm this package implements. lim
// must be valid (see sluice.Limit.Validate).
func NewStates(lim sluice.Limit, n int) States {
	if int(lim.Algorithm) >= len(registry) {
		return nil
	}
	if lim.Algorithm == sluice.SlidingWindow && lim.Moments > 0 {
		return newStates[SlidingMoments](lim, n)
	}
	if lim.Algorithm == sluice.SlidingWindow && lim.Buckets > 1 {
		return newStates[SlidingBuckets](lim, n)
	}
	return registry[lim.Algorithm](lim, n)
}

// stateSlice is the States of the algorithm whose state is S. Its methods
// have pointer receivers, so that an interface call reaches them without a
// wrapper that copies the slice.
type stateSlice[S any, P State[S]] struct {
	s        []S
	lim      sluice.Limit
	prepared int64
}

func newStates[S any, P State[S]](lim sluice.Limit, n int) States {
	return &stateSlice[S, P]{s: make([]S, n), lim: lim, prepared: P(nil).Prepare(lim)}
}

func (s *stateSlice[S, P]) Len() int                     { return len(s.s) }
func (s *stateSlice[S, P]) At(i int) Decider             { return P(&s.s[i]) }
func (s *stateSlice[S, P]) Size() int                    { return int(unsafe.Sizeof(*new(S))) }
func (s *stateSlice[S, P]) Limit() (sluice.Limit, int64) { return s.lim, s.prepared }

func (s *stateSlice[S, P]) Take(i int, now int64, cost int) (sluice.Result, int) {
	st := P(&s.s[i])
	return st.TakePrepared(now, s.lim, s.prepared, cost), st.Bytes()
}
