package failsafe

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Charger = (*Limiter)(nil)

// ChargeN charges where RefundN gives back: the primary while the breaker
// is closed (within the Group's Timeout), this server's share of the local
// limiter while it is open in Local mode. In Open and Closed modes, with
// the breaker open, nothing is charged: no store keeps the debt, and the
// Result admits. A primary that cannot charge is an error wrapping
// sluice.ErrCannotSettle.
func (l *Limiter) ChargeN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	cfg := &l.g.cfg
	if l.g.asking(key) {
		ch, ok := cfg.Primary.(sluice.Charger)
		if !ok {
			return sluice.Result{}, fmt.Errorf("%w: %T has no ChargeN", sluice.ErrCannotSettle, cfg.Primary)
		}
		cctx, _ := l.g.bound(ctx, l.g.breaker.Now())
		defer l.g.release(cctx)
		return ch.ChargeN(cctx, key, lim, cost)
	}
	if ch, ok := cfg.Local.(sluice.Charger); ok && l.mode == Local {
		return ch.ChargeN(ctx, key, cfg.Share(lim), cost)
	}
	return sluice.Result{Allowed: true}, nil
}
