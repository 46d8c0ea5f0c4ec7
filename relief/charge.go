package relief

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var (
	_ sluice.Charger = (*OverLimitCache)(nil)
	_ sluice.Charger = (*Hybrid)(nil)
	_ sluice.Charger = (*Batcher)(nil)
)

// charge forwards a ChargeN to inner, or says that inner cannot charge
// (wrapping sluice.ErrCannotSettle).
func charge(ctx context.Context, inner sluice.Limiter, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	ch, ok := inner.(sluice.Charger)
	if !ok {
		return sluice.Result{}, fmt.Errorf("%w: %T has no ChargeN", sluice.ErrCannotSettle, inner)
	}
	return ch.ChargeN(ctx, key, lim, cost)
}

// ChargeN charges the inner limiter (see sluice.Charger). A cached denial
// of key stays: a charge only adds to what the key spent.
func (c *OverLimitCache) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	return charge(ctx, c.inner, key, lim, cost)
}

// ChargeN charges the global limiter, whose state is what every server
// shares and what the answer reports, and this server's share of the local
// one where it can take a charge, so that the local limiter refuses the key
// while the debt lasts too.
func (h *Hybrid) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if ch, ok := h.local.(sluice.Charger); ok {
		if _, err := ch.ChargeN(ctx, key, h.share(lim), cost); err != nil {
			return sluice.Result{}, err
		}
	}
	return charge(ctx, h.global, key, lim, cost)
}

// ChargeN charges the store directly, outside any batch: the units were
// spent already, so no reservation of this server can cover them. Units
// this server already holds in a reservation for key are still spent
// locally: the debt is felt once they run out.
func (b *Batcher) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	return charge(ctx, b.inner, key, lim, cost)
}
