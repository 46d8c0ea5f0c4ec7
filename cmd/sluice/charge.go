package main

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var (
	_ sluice.Charger = (*lazyStore)(nil)
	_ sluice.Charger = (*periodSplit)(nil)
)

// ChargeN charges on Redis, or fails while it has never answered.
func (l *lazyStore) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if s := l.store.Load(); s != nil {
		return s.ChargeN(ctx, key, lim, cost)
	}
	return sluice.Result{}, l.notConnected()
}

// ChargeN is the chosen store's ChargeN, or an error wrapping
// sluice.ErrCannotSettle.
func (p *periodSplit) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	s := p.of(lim)
	if c, ok := s.(sluice.Charger); ok {
		return c.ChargeN(ctx, key, lim, cost)
	}
	return sluice.Result{}, fmt.Errorf("%w: %T has no ChargeN", sluice.ErrCannotSettle, s)
}
