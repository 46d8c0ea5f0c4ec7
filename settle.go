package sluice

import (
	"context"
	"errors"
	"fmt"
)

// Charger is implemented by limiters that can spend units without refusing
// them: the second half of reserve-then-settle, where a request admitted on
// an estimate turns out to cost more. A charge can leave a key in debt, over
// its limit, so that its next requests wait exactly what it owes: a token
// bucket's theoretical arrival time moves past a full bucket's span, a
// window counts past its rate. A key owes at most one capacity beyond empty
// (its state stays within twice the limit's capacity); what a charge would
// add past that is not charged. memstore and redisstore implement it for
// TokenBucket, FixedWindow and SlidingWindow, and every wrapper that wraps
// a Charger forwards it.
type Charger interface {
	// ChargeN spends cost units (at least 1, any number: it is never
	// refused for its size) of key's allowance under lim, and returns the
	// key's state afterwards as Peeker.Peek reports it: Allowed false and
	// RetryAfter the time until the key is back within its limit when the
	// charge left it in debt. The error is for bad input (an algorithm that
	// cannot carry a debt wraps ErrInvalidLimit) and for a failing backend.
	ChargeN(ctx context.Context, key string, lim Limit, cost int) (Result, error)
}

// CheckCharge validates a ChargeN's input: the key, the limit and a cost of
// at least 1, which unlike Check's may exceed the limit's capacity. It does
// not allocate unless it returns an error.
func CheckCharge(key string, lim Limit, cost int) error {
	if cost < 1 {
		return fmt.Errorf("%w: cost %d must be at least 1", ErrInvalidCost, cost)
	}
	return CheckPeek(key, lim)
}

// ErrCannotSettle is wrapped by Reserve's error when the Limiter cannot
// settle: it is not both a Refunder and a Charger.
var ErrCannotSettle = errors.New("sluice: limiter cannot settle (needs RefundN and ChargeN)")

// Reservation is an admission on an estimated cost, to be settled once the
// actual cost is known (tokens an LLM produced, rows a query scanned). Its
// zero value holds nothing: Settle on it does nothing. It is a small value,
// made by Reserve without allocating; settle it once.
type Reservation struct {
	// Result is the decision on the estimate. Only an Allowed reservation
	// spent anything; Settle on a denied one does nothing.
	Result
	limiter  Limiter
	key      string
	lim      Limit
	reserved int
}

// Reserve spends estimate units of key's allowance under lim, as AllowN
// does, and returns a Reservation to settle with the actual cost. The
// limiter must be a Refunder and a Charger (memstore, redisstore and the
// wrappers over them are), else the error wraps ErrCannotSettle.
func Reserve(ctx context.Context, l Limiter, key string, lim Limit, estimate int) (Reservation, error) {
	if _, ok := l.(Refunder); !ok {
		return Reservation{}, fmt.Errorf("%w: %T has no RefundN", ErrCannotSettle, l)
	}
	if _, ok := l.(Charger); !ok {
		return Reservation{}, fmt.Errorf("%w: %T has no ChargeN", ErrCannotSettle, l)
	}
	res, err := l.AllowN(ctx, key, lim, estimate)
	if err != nil {
		return Reservation{Result: res}, err
	}
	return Reservation{Result: res, limiter: l, key: key, lim: lim, reserved: estimate}, nil
}

// Settle makes the reservation cost actual units in all: the surplus of
// the estimate is refunded, or the shortfall charged, into debt if need be
// (see Charger), so that the key's spent total is the sum of actual costs.
// It returns the key's state afterwards, for honest headers on its next
// response (a refund's state is not read: Result is then zero with Allowed
// true). A negative actual counts as 0. Settle on a denied, zero or already
// settled Reservation does nothing and returns a zero Result.
func (r *Reservation) Settle(ctx context.Context, actual int) (Result, error) {
	if r.limiter == nil || !r.Allowed {
		return Result{}, nil
	}
	l, reserved := r.limiter, r.reserved
	r.limiter = nil
	actual = max(actual, 0)
	switch {
	case actual < reserved:
		return Result{Allowed: true}, l.(Refunder).RefundN(ctx, r.key, r.lim, reserved-actual)
	case actual > reserved:
		return l.(Charger).ChargeN(ctx, r.key, r.lim, actual-reserved)
	}
	return Result{Allowed: true}, nil
}

// Reserved returns the units the reservation spent: the estimate when it
// was admitted, else 0.
func (r *Reservation) Reserved() int {
	if !r.Allowed {
		return 0
	}
	return r.reserved
}
