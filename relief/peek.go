package relief

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice"
)

var (
	_ sluice.Peeker = (*OverLimitCache)(nil)
	_ sluice.Peeker = (*Hybrid)(nil)
	_ sluice.Peeker = (*Batcher)(nil)
)

// peeker returns inner as a sluice.Peeker, or an error wrapping
// errors.ErrUnsupported if it cannot peek.
func peeker(inner sluice.Limiter) (sluice.Peeker, error) {
	if pk, ok := inner.(sluice.Peeker); ok {
		return pk, nil
	}
	return nil, fmt.Errorf("relief: %T cannot peek: %w", inner, errors.ErrUnsupported)
}

// checkedPeeker checks a peek's key and limit (sluice.CheckPeek), then
// returns inner as a sluice.Peeker as peeker does.
func checkedPeeker(inner sluice.Limiter, key string, lim sluice.Limit) (sluice.Peeker, error) {
	if err := sluice.CheckPeek(key, lim); err != nil {
		return nil, err
	}
	return peeker(inner)
}

// Peek reads key's state without spending (see sluice.Peeker). While a
// denial of key is cached the cache answers, with no round trip: remaining
// 0 and the remembered reset (allowed, as a key at its limit peeks; the
// cache cannot tell a key over a limit lowered since). Otherwise it asks
// the inner limiter, which must be a sluice.Peeker (else the error wraps
// errors.ErrUnsupported).
func (c *OverLimitCache) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	pk, err := checkedPeeker(c.inner, key, lim)
	if err != nil {
		return sluice.Result{}, err
	}
	now := c.denied.now()
	sh := c.denied.shard(key)
	sh.mu.Lock()
	d, ok := sh.m[cacheKey{key, lim}]
	sh.mu.Unlock()
	if ok && now < d.expire {
		return sluice.Result{Allowed: true, ResetAfter: time.Duration(d.reset - now)}, nil
	}
	return pk.Peek(ctx, key, lim)
}

// Peek reads key's state on both limiters without spending (see
// sluice.Peeker) and reports it as AllowN would: the local share's answer
// when it is over, else the global one's with the tighter Remaining and the
// later ResetAfter. Both limiters must be sluice.Peekers (else the error
// wraps errors.ErrUnsupported).
func (h *Hybrid) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	lpk, err := peeker(h.local)
	if err != nil {
		return sluice.Result{}, err
	}
	gpk, err := peeker(h.global)
	if err != nil {
		return sluice.Result{}, err
	}
	lr, err := lpk.Peek(ctx, key, h.share(lim))
	if err != nil || !lr.Allowed {
		return lr, err
	}
	gr, err := gpk.Peek(ctx, key, lim)
	if err != nil || !gr.Allowed {
		return gr, err
	}
	gr.Remaining = min(gr.Remaining, lr.Remaining)
	gr.ResetAfter = max(gr.ResetAfter, lr.ResetAfter)
	return gr, nil
}

// Peek reads key's state on the inner limiter without spending (see
// sluice.Peeker), and adds the units this server holds reserved and
// unspent for key, which the store counts as spent: what this server could
// still admit. Units other servers hold are not seen. The inner limiter
// must be a sluice.Peeker (else the error wraps errors.ErrUnsupported).
func (b *Batcher) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	pk, err := checkedPeeker(b.inner, key, lim)
	if err != nil {
		return sluice.Result{}, err
	}
	res, err := pk.Peek(ctx, key, lim)
	if err != nil {
		return res, err
	}
	now := b.pools.now()
	sh := b.pools.shard(key)
	sh.mu.Lock()
	held := 0
	if p := sh.m[cacheKey{key, lim}]; p != nil && now < p.until {
		held = p.units
	}
	sh.mu.Unlock()
	if held > 0 {
		res.Remaining = min(res.Remaining+held, lim.Capacity())
		res.Allowed, res.RetryAfter = true, 0
	}
	return res, nil
}
