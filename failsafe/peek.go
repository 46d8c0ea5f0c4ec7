package failsafe

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluicehq/sluice"
)

var _ sluice.Peeker = (*Limiter)(nil)

// Peek reads key's state on the primary without spending (see
// sluice.Peeker), through the same timeout and breaker as a decision: a
// failed peek counts as a failure of the primary, a peek that runs out of
// the caller's time too (see Config.Timeout). While the primary fails,
// or the open breaker skips it, the Mode answers:
//
//   - Open: allowed, with the limit's whole capacity remaining and no reset
//     (the key's state is unknown; Open admits as if no limit applied);
//   - Closed: denied, RetryAfter the time until the next probe, with an
//     error wrapping ErrUnavailable, as a decision;
//   - Local: the local limiter's peek under the local share of the limit.
//
// A primary (or, in Local mode, a local limiter) that is not a
// sluice.Peeker makes Peek fail with an error wrapping
// errors.ErrUnsupported, which is not a store failure.
func (l *Limiter) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	res, _, err := l.DecidePeek(ctx, key, lim)
	return res, err
}

// DecidePeek is Peek that also reports whether the answer was made without
// the primary, as Decide does for a decision.
func (l *Limiter) DecidePeek(ctx context.Context, key string, lim sluice.Limit) (res sluice.Result, fellBack bool, err error) {
	if err := sluice.CheckPeek(key, lim); err != nil {
		return sluice.Result{}, false, err
	}
	pk, ok := l.g.cfg.Primary.(sluice.Peeker)
	if !ok {
		return sluice.Result{}, false, fmt.Errorf("failsafe: primary %T cannot peek: %w", l.g.cfg.Primary, errors.ErrUnsupported)
	}
	g := l.g
	now := g.breaker.Now()
	h := g.hash(key)
	b, allowed, probe := g.admit(h, now)
	if !allowed {
		res, err = l.degradePeek(ctx, b, key, h, lim, nil)
		return res, true, err
	}
	cctx, judged := g.bound(ctx, now)
	res, err = pk.Peek(cctx, key, lim)
	ranOut := cctx.Err() != nil
	g.release(cctx)
	switch {
	case err == nil:
		g.success(b, probe)
		return res, false, nil
	case errors.Is(err, sluice.ErrBadInput), callerGaveUp(ctx, ranOut, judged):
		// The caller's mistake, or the caller gave up: nothing about the store.
		b.Release(probe)
		return sluice.Result{}, false, err
	}
	g.failure(b, now, probe)
	res, err = l.degradePeek(ctx, b, key, h, lim, err)
	return res, true, err
}

// degradePeek answers a peek without the primary, as the Mode says; it
// counts and logs as degrade does.
func (l *Limiter) degradePeek(ctx context.Context, b *Breaker, key string, h uint64, lim sluice.Limit, cause error) (sluice.Result, error) {
	g := l.g
	if l.mode == Closed {
		return l.degrade(ctx, b, key, h, lim, 1, cause) // a decision's answer: nothing is spent in Closed mode
	}
	g.countFallback(cause)
	if l.mode == Local {
		pk, ok := g.cfg.Local.(sluice.Peeker)
		if !ok {
			return sluice.Result{}, fmt.Errorf("failsafe: local limiter %T cannot peek: %w", g.cfg.Local, errors.ErrUnsupported)
		}
		return pk.Peek(ctx, key, g.cfg.Share(lim))
	}
	return sluice.Result{Allowed: true, Remaining: lim.Capacity()}, nil
}
