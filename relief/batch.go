package relief

import (
	"context"
	"time"

	"github.com/sluicehq/sluice"
)

// Batcher takes a very hot key's units from the inner (remote) limiter in
// batches: one round trip reserves Batch units, which later requests of this
// server spend locally with no round trip until they run out or Hold
// passes. It is safe for concurrent use.
//
// Accuracy: units are charged when reserved and spent up to Hold later, so
// the limit's bound can be exceeded by what is spent late: at most
// servers × (Batch−1) units in any window, for a key, over what the limit
// alone admits. For a fixed window a reservation never outlives the window
// it was charged to, so there the bound is zero. The other way, a server
// holding unspent units keeps them from the others, at most Batch−1 units
// per server and key, for at most Hold, after which the next request gives
// them back (when the inner limiter is a sluice.Refunder, as redisstore
// is). Denials are exact: a request that a batch cannot cover asks for its
// own cost. Counting locally and sending increments later would admit up to
// servers × Batch too many with no bound in time; reserving first keeps the
// bound small and known.
//
// Once a key is over its limit every request costs a round trip or two;
// put an OverLimitCache in front of the Batcher so that denials cost none.
type Batcher struct {
	inner sluice.Limiter
	batch int
	hold  time.Duration
	pools table[*pool]
}

// pool is a server's unspent reservation for one key and limit.
type pool struct {
	units int
	until int64 // Unix ns after which unspent units go back
	reset int64 // Unix ns at which the store's state of the key is as good as new
}

// BatchConfig configures a Batcher.
type BatchConfig struct {
	// Batch is how many units one round trip reserves. Default 10.
	Batch int
	// Hold is how long a server keeps unspent units. Default 100ms.
	Hold time.Duration
	// MaxKeys bounds the keys with a reservation held; beyond it, new
	// reservations are not pooled (their leftover units are lost). Default
	// 100,000.
	MaxKeys int
	// Clock tells the time; nil means the system clock.
	Clock sluice.Clock
}

var _ sluice.Limiter = (*Batcher)(nil)

// NewBatcher returns inner with batched reservations.
func NewBatcher(inner sluice.Limiter, cfg BatchConfig) *Batcher {
	if cfg.Batch <= 0 {
		cfg.Batch = 10
	}
	if cfg.Hold <= 0 {
		cfg.Hold = 100 * time.Millisecond
	}
	b := &Batcher{inner: inner, batch: cfg.Batch, hold: cfg.Hold}
	b.pools.init(cfg.Clock, cfg.MaxKeys)
	return b
}

// RefundN gives units back to the inner limiter, which was charged for
// them when they were reserved.
func (b *Batcher) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if rf, ok := b.inner.(sluice.Refunder); ok {
		return rf.RefundN(ctx, key, lim, cost)
	}
	return nil
}

// Allow is shorthand for AllowN(ctx, key, lim, 1).
func (b *Batcher) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return b.AllowN(ctx, key, lim, 1)
}

// AllowN spends cost units from this server's reservation for key, and
// reserves a new batch when it runs out. A Result answered locally reports
// the units left in the reservation as Remaining (there may be more
// globally). ResetAfter is the store's, which was charged for the whole
// batch when it was reserved: later than an unbatched store would say
// after the units spent so far, never earlier.
func (b *Batcher) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := sluice.Check(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	now := b.pools.now()
	sh := b.pools.shard(key)
	ck := cacheKey{key, lim}
	giveBack := 0

	sh.mu.Lock()
	p := sh.m[ck]
	if p != nil && now < p.until && p.units >= cost {
		p.units -= cost
		left, reset := p.units, max(p.reset-now, 0)
		sh.mu.Unlock()
		return sluice.Result{Allowed: true, Remaining: left, ResetAfter: time.Duration(reset)}, nil
	}
	if p != nil {
		giveBack = p.units // expired or too small: return what is left
		delete(sh.m, ck)
	}
	sh.mu.Unlock()

	if giveBack > 0 {
		if rf, ok := b.inner.(sluice.Refunder); ok {
			rctx, cancel := refundContext(ctx)
			rf.RefundN(rctx, key, lim, giveBack)
			cancel()
		}
	}
	n := max(min(b.batch, lim.Capacity()), cost)
	res, err := b.inner.AllowN(ctx, key, lim, n)
	for err == nil && !res.Allowed && n > cost {
		// Not a whole batch left: take what is left if it covers this
		// request, else ask for just this request, so that a denial's
		// RetryAfter is the one for its own cost.
		if res.Remaining > cost {
			n = min(res.Remaining, n-1)
		} else {
			n = cost
		}
		res, err = b.inner.AllowN(ctx, key, lim, n)
	}
	if err != nil || !res.Allowed {
		return res, err
	}
	if left := n - cost; left > 0 {
		until := now + int64(b.hold)
		if lim.Algorithm == sluice.FixedWindow {
			// Never spend a window's units in the next one.
			until = min(until, now+int64(res.ResetAfter))
		}
		sh.mu.Lock()
		reset := now + int64(res.ResetAfter)
		if q := sh.m[ck]; q != nil {
			q.units += left // another request reserved meanwhile: pool both
			q.until = min(q.until, until)
			q.reset = max(q.reset, reset)
		} else if b.pools.room(sh, now, func(p *pool) int64 { return p.until }) {
			// (Expired pools dropped for room lose their units, as with a crash.)
			sh.m[ck] = &pool{units: left, until: until, reset: reset}
		}
		sh.mu.Unlock()
	}
	res.Remaining += n - cost
	return res, nil
}
