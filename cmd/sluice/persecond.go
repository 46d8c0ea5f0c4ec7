package main

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// perSecondBelow is the period under which a limit goes to the per-second
// store: envoyproxy/ratelimit's SECOND unit, and Sluice's multiples of a
// second below a minute.
const perSecondBelow = time.Minute

// periodSplit is envoyproxy/ratelimit's REDIS_PERSECOND: a Limiter that
// decides limits whose period is under a minute on one store and all
// others on another, so that the short-lived, busy per-second counters
// can live on a Redis of their own. It keeps the stores' capabilities:
// RefundN, Peek and ValidateLimit go to the store that holds the limit,
// and are errors.ErrUnsupported (ValidateLimit: nil) for a store that has
// none. It is safe for concurrent use if the stores are.
type periodSplit struct {
	main, perSecond sluice.Limiter
}

var (
	_ sluice.Limiter        = (*periodSplit)(nil)
	_ sluice.Refunder       = (*periodSplit)(nil)
	_ sluice.Peeker         = (*periodSplit)(nil)
	_ sluice.LimitValidator = (*periodSplit)(nil)
)

// newPeriodSplit returns the split of main and perSecond.
func newPeriodSplit(main, perSecond sluice.Limiter) *periodSplit {
	return &periodSplit{main: main, perSecond: perSecond}
}

// of returns the store that holds lim.
func (p *periodSplit) of(lim sluice.Limit) sluice.Limiter {
	if lim.Period < perSecondBelow {
		return p.perSecond
	}
	return p.main
}

// AllowN is the chosen store's AllowN.
func (p *periodSplit) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	return p.of(lim).AllowN(ctx, key, lim, cost)
}

// RefundN is the chosen store's RefundN, or errors.ErrUnsupported.
func (p *periodSplit) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if r, ok := p.of(lim).(sluice.Refunder); ok {
		return r.RefundN(ctx, key, lim, cost)
	}
	return errors.ErrUnsupported
}

// Peek is the chosen store's Peek, or errors.ErrUnsupported.
func (p *periodSplit) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	if pk, ok := p.of(lim).(sluice.Peeker); ok {
		return pk.Peek(ctx, key, lim)
	}
	return sluice.Result{}, errors.ErrUnsupported
}

// ValidateLimit is the chosen store's ValidateLimit, or nil.
func (p *periodSplit) ValidateLimit(lim sluice.Limit) error {
	if v, ok := p.of(lim).(sluice.LimitValidator); ok {
		return v.ValidateLimit(lim)
	}
	return nil
}
