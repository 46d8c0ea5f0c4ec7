package relief

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

// PerSecondBelow is the period under which PeriodSplit sends a limit to
// its per-second store: envoyproxy/ratelimit's SECOND unit, and Sluice's
// multiples of a second below a minute.
const PerSecondBelow = time.Minute

// PeriodSplit is envoyproxy/ratelimit's REDIS_PERSECOND: a sluice.Limiter
// that decides the limits whose period is under PerSecondBelow on one
// store and all others on another. It keeps the stores' capabilities:
// RefundN, Peek, ChargeN and ValidateLimit go to the store that holds the
// limit, and are errors.ErrUnsupported (ChargeN: an error wrapping
// sluice.ErrCannotSettle; ValidateLimit: nil) for a store that has none.
// It is safe for concurrent use if the stores are. Its zero value is not
// usable: make one with NewPeriodSplit.
type PeriodSplit struct {
	main, perSecond sluice.Limiter
}

var (
	_ sluice.Limiter        = (*PeriodSplit)(nil)
	_ sluice.Refunder       = (*PeriodSplit)(nil)
	_ sluice.Peeker         = (*PeriodSplit)(nil)
	_ sluice.LimitValidator = (*PeriodSplit)(nil)
	_ sluice.Charger        = (*PeriodSplit)(nil)
)

// NewPeriodSplit returns the split of main (limits of a minute or more)
// and perSecond (limits under a minute). It does not close them.
func NewPeriodSplit(main, perSecond sluice.Limiter) *PeriodSplit {
	return &PeriodSplit{main: main, perSecond: perSecond}
}

// of returns the store that holds lim.
func (p *PeriodSplit) of(lim sluice.Limit) sluice.Limiter {
	if lim.Period < PerSecondBelow {
		return p.perSecond
	}
	return p.main
}

// AllowN is the chosen store's AllowN.
func (p *PeriodSplit) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	return p.of(lim).AllowN(ctx, key, lim, cost)
}

// RefundN is the chosen store's RefundN, or errors.ErrUnsupported.
func (p *PeriodSplit) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if r, ok := p.of(lim).(sluice.Refunder); ok {
		return r.RefundN(ctx, key, lim, cost)
	}
	return errors.ErrUnsupported
}

// Peek is the chosen store's Peek, or errors.ErrUnsupported.
func (p *PeriodSplit) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	if pk, ok := p.of(lim).(sluice.Peeker); ok {
		return pk.Peek(ctx, key, lim)
	}
	return sluice.Result{}, errors.ErrUnsupported
}

// ChargeN is the chosen store's ChargeN, or an error wrapping
// sluice.ErrCannotSettle.
func (p *PeriodSplit) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	s := p.of(lim)
	if c, ok := s.(sluice.Charger); ok {
		return c.ChargeN(ctx, key, lim, cost)
	}
	return sluice.Result{}, fmt.Errorf("%w: %T has no ChargeN", sluice.ErrCannotSettle, s)
}

// ValidateLimit is the chosen store's ValidateLimit, or nil.
func (p *PeriodSplit) ValidateLimit(lim sluice.Limit) error {
	if v, ok := p.of(lim).(sluice.LimitValidator); ok {
		return v.ValidateLimit(lim)
	}
	return nil
}
