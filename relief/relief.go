// Package relief takes load off a remote limiter's hot path. Each wrapper is
// optional and states what it costs in accuracy.
//
// OverLimitCache answers a key already known to be over its limit (denied a
// request of cost 1) from memory until its RetryAfter has passed, with no
// round trip: a client that
// ignores 429s and keeps sending costs Redis nothing (Cloudflare and
// envoyproxy/ratelimit do the same). Accuracy cost: none for the decision
// itself: it never admits a request the remote limiter would deny (zero
// over-admission, per process and in total). A RetryAfter says when a
// request could be admitted if nothing else is spent, and spending
// elsewhere only makes that later, so every cached denial is one the remote
// limiter would also have made. What is lost: a refund made by another
// process during the wait is not seen until the cached denial ends, so a
// process may deny, for at most the RetryAfter it cached (or
// CacheConfig.MaxHold, when shorter), requests the refunded units would
// have admitted (a refund through the cache itself forgets the denial). A sliding window with CountRejected counts the
// requests it denies, so its limits pass through the cache uncached.
//
// Hybrid puts a local limiter in front of a global one, as Envoy pairs its
// local rate limit filter with the global service: a request must pass a
// local share of the limit first, so a burst that one server alone would
// push past the limit never reaches Redis. Accuracy cost: a request the
// local pass denies is denied even if the global limit had room, so a
// server whose clients are unevenly spread may deny early; choose the local
// share generously. The default is the whole limit per server, which stops
// little that the global limit would admit (with window algorithms, local
// and Redis windows follow different clocks, so the two can disagree near a
// boundary).
//
// Fleet counts the live processes that share a store, each announcing
// itself on a Roster (redisstore.Roster: a member per process with a time
// to live), so that a share of a split limit (Hybrid's, the failure mode
// local's) follows the fleet as it scales rather than a number fixed at
// start. Accuracy cost: each process uses the count it last saw, at most
// one announce Period old; a process that has not yet seen J processes
// join n still uses its larger share, so the shares alone may add up to L +
// J·⌊L/(n+1)⌋ for a limit L until every process has counted again (the
// store, when it answers, still admits at most L), and one that has not
// yet seen processes leave (or a crashed one's TTL pass) keeps its smaller
// share meanwhile.
//
// Batcher reserves a very hot key's units from the remote limiter in
// batches and spends them locally. Accuracy cost: for a fixed window none
// over the limit (unless a refund travels slower than the reservation did,
// see Batcher); for the other algorithms at most servers × (Batch−1) units
// over it in a window; and at most servers × (Batch−1) units held back,
// each for at most Hold. Its Release gives the held units back at
// shutdown. With leases (BatchConfig.LeaseShare f) a key's reservation is
// sized from its recent use on the server, at most ⌊f × limit⌋ units, and
// those bounds hold with that in place of Batch; keys used less than twice
// a Hold, or whose limit is under 2/f, are decided exactly. Given a
// Fleet's count n (BatchConfig.Processes), a lease is at most
// ⌊f × limit / n⌋, none before the first count, so the servers together
// hold under f × limit, whatever their number.
//
// PeriodSplit sends the limits whose period is under a minute to a store
// of their own (envoyproxy/ratelimit's REDIS_PERSECOND), so that the
// short-lived, busy per-second counters can live on a Redis apart.
// Accuracy cost: none; each limit is decided on one store only.
package relief

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice"
)

// OverLimitCache is a sluice.Limiter that remembers denials until their
// RetryAfter. It is safe for concurrent use.
type OverLimitCache struct {
	inner   sluice.Limiter
	maxHold int64 // CacheConfig.MaxHold in ns; 0: none
	denied  table[denial]
}

// denial is a cached denial: until when the key is denied a request of
// cost 1, when it is as good as new (Unix ns, never before until), so
// that a cached answer keeps both RetryAfter and ResetAfter, and when the
// cache stops answering for it (never after until: CacheConfig.MaxHold).
type denial struct {
	until, reset, expire int64
}

// CacheConfig configures an OverLimitCache.
type CacheConfig struct {
	// MaxKeys bounds the keys remembered; when full, the cache forgets
	// entries whose time has passed and then, if need be, stops adding.
	// Default 100,000.
	MaxKeys int
	// MaxBytes bounds the memory the remembered keys take, in bytes: each
	// counts its key's bytes and about 128 bytes of map entry. When full,
	// the cache behaves as at MaxKeys. Default 32 MiB, which holds the
	// default MaxKeys of keys up to about 200 bytes, and about 7,800 keys
	// of 4 KB (sluice.MaxKeyLen).
	MaxBytes int64
	// MaxHold bounds how long a denial is answered from memory before the
	// inner limiter is asked again (never past its RetryAfter): a refund
	// or a reset made by another process is seen at most MaxHold late.
	// Zero or less: until the RetryAfter, which for a long window can be
	// hours.
	MaxHold time.Duration
	// Clock tells the time; nil means the system clock.
	Clock sluice.Clock
}

var (
	_ sluice.Limiter  = (*OverLimitCache)(nil)
	_ sluice.Refunder = (*OverLimitCache)(nil)
	_ sluice.Refunder = (*Hybrid)(nil)
	_ sluice.Refunder = (*Batcher)(nil)
)

// refundContext keeps a refund going when the request's context is
// cancelled, but not forever: a hung store must not hang a request.
func refundContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Second)
}

// NewOverLimitCache returns inner wrapped in an over-limit cache.
func NewOverLimitCache(inner sluice.Limiter, cfg CacheConfig) *OverLimitCache {
	c := &OverLimitCache{inner: inner, maxHold: max(int64(cfg.MaxHold), 0)}
	c.denied.init(cfg.Clock, cfg.MaxKeys, cfg.MaxBytes)
	return c
}

// Allow is shorthand for AllowN(ctx, key, lim, 1).
func (c *OverLimitCache) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return c.AllowN(ctx, key, lim, 1)
}

// AllowN answers from the cache while key is known to be over lim, and asks
// the inner limiter otherwise.
func (c *OverLimitCache) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := sluice.Check(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	if cost != 1 || lim.CountRejected {
		// The cache holds denials of cost 1: a larger cost is denied too,
		// but its RetryAfter would be later than the one remembered. A
		// CountRejected limit counts every request, denied or not, so
		// each must reach the store.
		return c.inner.AllowN(ctx, key, lim, cost)
	}
	now := c.denied.now()
	sh := c.denied.shard(key)
	ck := cacheKey{key, lim}
	sh.mu.Lock()
	d, ok := sh.m[ck]
	if ok && now < d.expire {
		sh.mu.Unlock()
		return sluice.Result{RetryAfter: time.Duration(d.until - now), ResetAfter: time.Duration(d.reset - now)}, nil
	}
	if ok {
		c.denied.del(sh, ck)
	}
	sh.mu.Unlock()

	res, err := c.inner.AllowN(ctx, key, lim, cost)
	if err != nil || res.Allowed || res.RetryAfter <= 0 {
		return res, err
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// A shard full of live denials declines: the answer is then not cached.
	until := now + int64(res.RetryAfter)
	expire := until
	if c.maxHold > 0 {
		expire = min(until, now+c.maxHold)
	}
	c.denied.put(sh, ck, denial{until: until, reset: max(until, now+int64(res.ResetAfter)), expire: expire}, now,
		func(d denial) int64 { return d.expire })
	return res, nil
}

// RefundN forgets a cached denial of key and gives the units back to the
// inner limiter, if it can take them.
func (c *OverLimitCache) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	sh := c.denied.shard(key)
	sh.mu.Lock()
	c.denied.del(sh, cacheKey{key, lim})
	sh.mu.Unlock()
	if rf, ok := c.inner.(sluice.Refunder); ok {
		return rf.RefundN(ctx, key, lim, cost)
	}
	return nil
}

// Hybrid is a sluice.Limiter that asks a local limiter first and a global
// one only for requests the local one admits. It is safe for concurrent
// use.
type Hybrid struct {
	local, global sluice.Limiter
	share         func(sluice.Limit) sluice.Limit
}

var _ sluice.Limiter = (*Hybrid)(nil)

// NewHybrid returns a Hybrid of local and global. share turns a limit into
// the local one; nil means the same limit on every server.
func NewHybrid(local, global sluice.Limiter, share func(sluice.Limit) sluice.Limit) *Hybrid {
	if share == nil {
		share = func(l sluice.Limit) sluice.Limit { return l }
	}
	return &Hybrid{local: local, global: global, share: share}
}

// RefundN gives the units back to both limiters, where they can take them.
func (h *Hybrid) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	var errs []error
	if rf, ok := h.local.(sluice.Refunder); ok {
		share := h.share(lim)
		errs = append(errs, rf.RefundN(ctx, key, share, min(cost, share.Capacity())))
	}
	if rf, ok := h.global.(sluice.Refunder); ok {
		errs = append(errs, rf.RefundN(ctx, key, lim, cost))
	}
	return errors.Join(errs...)
}

// Allow is shorthand for AllowN(ctx, key, lim, 1).
func (h *Hybrid) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return h.AllowN(ctx, key, lim, 1)
}

// AllowN admits a request only if both the local share and the global limit
// admit it. A request the global limit denies gives its local units back
// when the local limiter is a sluice.Refunder, so that the local pass does
// not run ahead of the global one.
func (h *Hybrid) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	local := h.share(lim)
	lr, err := h.local.AllowN(ctx, key, local, cost)
	if err != nil || !lr.Allowed {
		return lr, err
	}
	gr, err := h.global.AllowN(ctx, key, lim, cost)
	if err != nil || !gr.Allowed {
		if rf, ok := h.local.(sluice.Refunder); ok {
			rctx, cancel := refundContext(ctx)
			rf.RefundN(rctx, key, local, cost)
			cancel()
		}
		return gr, err
	}
	// Report the tighter of the two.
	if lr.Remaining < gr.Remaining {
		gr.Remaining = lr.Remaining
	}
	gr.ResetAfter = max(gr.ResetAfter, lr.ResetAfter)
	return gr, nil
}
