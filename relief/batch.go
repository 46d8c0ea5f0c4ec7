package relief

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Batcher takes a very hot key's units from the inner (remote) limiter in
// batches: one round trip reserves Batch units, which later requests of this
// server spend locally with no round trip until they run out or Hold
// passes. It is safe for concurrent use.
//
// Accuracy: units are charged when reserved and spent up to Hold later.
// For a fixed window (calendar periods included) a reservation is spent
// only before the window it was charged to ends (by the store's
// ResetAfter), and its unspent units go back only while that window is
// open (see refundBy); units still held at its end stay charged to it, as
// if spent there. So the bound over what the limit alone admits is zero,
// with one exception: a refund sent in the last stretch of a window that
// takes longer to reach the store than the reservation took to come back
// lands in the next window, which then admits that refund's units (at
// most Batch−1) too many. For the other algorithms, units spent late can
// exceed the limit's bound by at most servers × (Batch−1) units in any
// window, for a key; their refunds follow the same rule (a sliding window
// takes them back until its window of Period ends, judged on this
// server's clock, so a store whose clock is off by d may count a refund
// sent within d of the end in the next one; a sliding log for Period; a
// token or leaky bucket at any time, never past full).
//
// The other way, a server holding unspent units keeps them from the
// others, at most Batch−1 units per server and key, for at most Hold,
// after which the next request gives them back if their window is open
// (when the inner limiter is a sluice.Refunder, as redisstore and pgstore
// are; two reservations that race pool at most Batch−1 units and give the
// rest back at once). A reservation whose request gives up (its context
// ends) before the store answers goes on, bounded as a refund is, and its
// units are held when the answer lands, so that a store that counted it
// does not keep them charged for nobody. It goes on with the request's
// values, on a context derived from the request's, which has ended by
// then: package failsafe, whose call contexts are reused, never lends one
// that ended to another call. At shutdown, Release gives back what is
// held. Denials are exact: a request that a batch cannot cover asks for its own cost,
// and one the store denies while this server is moving units of the key
// waits for them to land before it is denied. Counting locally and sending
// increments later would admit up to servers × Batch too many with no
// bound in time; reserving first keeps the bound small and known.
//
// Leases (BatchConfig.LeaseShare = f) size each key's reservation from
// what this server asked of the key in the last Hold, at most ⌊f × C⌋ of a
// limit of capacity C, and none when that is under 2: every bound above
// holds with L = ⌊f × C⌋ in place of Batch, per key, and is zero for keys
// that get no lease (decided exactly, one request at a time). So with N
// servers a fixed window admits no more than its limit and at least its
// limit less N × (L−1); the other algorithms at most N × (L−1) over.
//
// With BatchConfig.Processes (a Fleet's count), a server that counted n
// leases at most L = ⌊f × C / n⌋, so a fleet of n that has counted itself
// holds at most n × (L−1) < f × C units of a key in total, whatever n is:
// the bounds above hold with f × C in place of N × (L−1). A server leases
// nothing before it has counted. Between J servers joining and the others
// counting them (a Fleet's Period) and for a Hold after (the leases taken
// before), the fleet holds at most f × C + J × ⌊f × C / (n+1)⌋ units: each
// joiner has counted itself and those before it.
//
// Once a key is over its limit every request costs a round trip or two;
// put an OverLimitCache in front of the Batcher so that denials cost none.
type Batcher struct {
	inner sluice.Limiter
	rf    sluice.Refunder // inner, if it takes units back; else nil
	batch int
	hold  time.Duration
	lease float64    // BatchConfig.LeaseShare; 0: reservations of batch units
	procs func() int // BatchConfig.Processes; nil: leases of one process's share
	// door, with leases, remembers per shard (under its lock) keys seen
	// once lately, by hash, so that a key gets a pool, which costs an
	// allocation, only when it is asked for a second time within a Hold.
	door  *[len(table[*pool]{}.shards)][doorSlots]doorSlot
	pools table[*pool]
	// released is set by Release: decisions go to the inner limiter
	// directly, and units that land are given back at once.
	released atomic.Bool
}

// pool is a server's unspent reservation for one key and limit, and the
// requests of this server moving units of the key to or from the store.
type pool struct {
	units int
	left  int   // the store's Remaining when the units were charged
	until int64 // Unix ns after which unspent units go back
	reset int64 // Unix ns at which the store's state of the key is as good as new
	// refundBy is the Unix ns from which the units may no longer go back
	// to the store: their window has ended (see refundBy).
	refundBy int64
	// moving counts the requests reserving units of the key or giving them
	// back; landed, when not nil, is closed when one of them lands.
	moving int
	landed chan struct{}
	// With leases, the units this server asked of the key: cur since win
	// (Unix ns), prev in the Hold before it; the pool is kept, though
	// empty, until kept (Unix ns), two Holds after the interval it last
	// counted in began.
	win, kept int64
	cur, prev int
	// coming is, with leases, the units of the leases on their way that
	// no request has claimed: a request that finds no units waits for
	// them rather than asking the store itself.
	coming int
}

// doorSlots is how many keys seen once each shard of a Batcher with
// leases remembers: a key whose slot another key took since is seen anew.
const doorSlots = 256

// doorSlot is a key seen once: its hash, and when (Unix ns).
type doorSlot struct {
	hash uint64
	at   int64
}

// expiry is when a pool may be dropped to make room: when its units expire
// and, with leases, its use has been counted for two Holds with none, and
// never while units are moving.
func (p *pool) expiry() int64 {
	if p.moving > 0 {
		return 1<<63 - 1
	}
	return max(p.until, p.kept)
}

// count records that this server asked for cost units of the pool's key at
// now, in intervals of hold ns.
func (p *pool) count(now, hold int64, cost int) {
	switch d := now - p.win; {
	case d >= 2*hold || d < 0:
		p.win, p.cur, p.prev = now, 0, 0
	case d >= hold:
		p.win, p.cur, p.prev = p.win+hold, 0, p.cur
	}
	p.cur += cost
	p.kept = p.win + 2*hold
}

// recent estimates the units this server asked of the pool's key in the
// last hold ns before now: the current interval's, and the previous
// interval's in proportion to the part of it still within hold of now (a
// sliding window's estimate).
func (p *pool) recent(now, hold int64) int {
	in := min(max(now-p.win, 0), hold)
	return p.cur + int(int64(p.prev)*(hold-in)/hold)
}

// BatchConfig configures a Batcher.
type BatchConfig struct {
	// Batch is how many units one round trip reserves. Default 10.
	Batch int
	// Hold is how long a server keeps unspent units; with leases, also
	// the span over which a key's use sizes its lease. Default 100ms.
	Hold time.Duration
	// MaxKeys bounds the keys with a reservation held; beyond it, new
	// reservations are not pooled (their leftover units go back to the
	// store at once, when it takes refunds). Default 100,000.
	MaxKeys int
	// MaxBytes bounds the memory of the reservations held, in bytes (each
	// counts its key's bytes and about 128 bytes); beyond it, as beyond
	// MaxKeys. Default 32 MiB.
	MaxBytes int64
	// LeaseShare, when above 0, sizes each key's reservation (its lease)
	// from the key's recent use on this server and its limit, in place of
	// Batch: the units this server asked of the key in the last Hold (so a
	// lease lasts about a Hold), at most ⌊LeaseShare × capacity⌋ of the
	// limit (Burst for a bucket, Rate otherwise), and no lease, a decision
	// of the request's own cost alone, when that comes to less than 2 (a
	// key seldom asked for, or a limit too small for a share to hold two
	// units). A server then holds at most ⌊LeaseShare × capacity⌋−1 units of
	// a key, in place of Batch−1, and N servers N times that (see the
	// bounds on Batcher). A key's first request within a Hold is
	// remembered by its hash in a fixed 256 KiB (besides MaxBytes), not in
	// a reservation. At most 1. Default 0: batches of Batch.
	LeaseShare float64
	// Processes, with leases, returns how many processes share the inner
	// store and lease from it, this one among them, such as Fleet.Fresh:
	// each lease is then at most ⌊LeaseShare × capacity / n⌋ units for
	// the n it returns when the lease is sized, and none (a decision of
	// the request's own cost alone) while it returns less than 1 (not
	// counted yet, or the count is stale) or that comes to less than 2, so
	// that n processes hold under LeaseShare of a limit in total, not
	// each. It is called when a lease is sized and again when it lands
	// (units beyond the cap then, all of them when it returns less than 1,
	// go back); nil: each process leases up to LeaseShare of a limit.
	Processes func() int
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
	b := &Batcher{inner: inner, batch: cfg.Batch, hold: cfg.Hold, lease: min(max(cfg.LeaseShare, 0), 1), procs: cfg.Processes}
	b.rf, _ = inner.(sluice.Refunder)
	if b.lease > 0 {
		b.door = new([len(table[*pool]{}.shards)][doorSlots]doorSlot)
	}
	b.pools.init(cfg.Clock, cfg.MaxKeys, cfg.MaxBytes)
	return b
}

// RefundN gives units back to the inner limiter, which was charged for
// them when they were reserved.
func (b *Batcher) RefundN(ctx context.Context, key string, lim sluice.Limit, cost int) error {
	if b.rf == nil {
		return nil
	}
	return b.rf.RefundN(ctx, key, lim, cost)
}

// Allow is shorthand for AllowN(ctx, key, lim, 1).
func (b *Batcher) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return b.AllowN(ctx, key, lim, 1)
}

// AllowN spends cost units from this server's reservation for key, and
// reserves a new batch when it runs out. A Result answered locally reports
// as Remaining the units left in the reservation and those the store had
// left when it was charged for it (other servers may have spent some
// since). ResetAfter is the store's, which was charged for the whole
// batch when it was reserved: later than an unbatched store would say
// after the units spent so far, never earlier.
//
// A request the store denies while other requests of this server are
// reserving units of the key, or giving them back, waits for those to land
// (at most a round trip each, a few times) and tries again, so that a
// server never denies a request for want of units it is itself moving.
func (b *Batcher) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	if err := sluice.Check(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	if b.released.Load() {
		return b.inner.AllowN(ctx, key, lim, cost)
	}
	now := b.pools.now()
	sh := b.pools.shard(key)
	ck := cacheKey{key, lim}

	sh.mu.Lock()
	if res, ok := spend(sh, ck, now, cost, b.counts()); ok {
		sh.mu.Unlock()
		return res, nil
	}
	if b.lease > 0 {
		var res sluice.Result
		var ok bool
		if res, now, ok = b.await(ctx, sh, ck, now, cost); ok {
			sh.mu.Unlock()
			return res, nil
		}
	}
	return b.reserve(ctx, sh, ck, now, cost)
}

// await is AllowN with leases when the reservation cannot cover the
// request but units of a lease on its way are unclaimed: it claims cost of
// them, waits for a lease to land and spends from it, reporting ok; else,
// or when what landed was spent by others first, it reports false and the
// time now, to reserve. sh.mu is held, and released while it waits. One
// round trip then serves the concurrent requests its units cover, as a
// reservation of Batch units alone does not: each request that misses
// goes to the store.
func (b *Batcher) await(ctx context.Context, sh *shard[*pool], ck cacheKey, now int64, cost int) (sluice.Result, int64, bool) {
	p := sh.m[ck]
	if p == nil || p.coming < cost {
		return sluice.Result{}, now, false
	}
	p.coming -= cost
	waitLanded(ctx, sh, p)
	now = b.pools.now()
	res, ok := spend(sh, ck, now, cost, b.counts())
	return res, now, ok
}

// waitLanded waits, with sh.mu released, until units of p in motion land
// (see end) or ctx is done, and reports whether they landed. sh.mu is held
// on entry and again on return; p is sh's pool of the key.
func waitLanded(ctx context.Context, sh *shard[*pool], p *pool) bool {
	if p.landed == nil {
		p.landed = make(chan struct{})
	}
	landed := p.landed
	sh.mu.Unlock()
	defer sh.mu.Lock()
	select {
	case <-landed:
		return true
	case <-ctx.Done():
		return false
	}
}

// counts is the interval, in ns, in which leases count a key's use; 0
// (nothing counted) for batches.
func (b *Batcher) counts() int64 {
	if b.lease > 0 {
		return int64(b.hold)
	}
	return 0
}

// most is the most units a reservation of lim takes: Batch, or a lease's
// share of lim, divided by the processes counted (0 while they are not);
// at most lim's capacity.
func (b *Batcher) most(lim sluice.Limit) int {
	if b.lease > 0 {
		n := 1
		if b.procs != nil {
			if n = b.procs(); n < 1 {
				return 0
			}
		}
		return int(b.lease * float64(lim.Capacity()) / float64(n))
	}
	return min(b.batch, lim.Capacity())
}

// counted returns ck's pool, having counted a request of cost at now in
// it (leases), or nil when ck has none and this is the first time within a
// Hold that it is asked for (as far as the door remembers), or there is no
// room: a key asked for once gets no lease, and costs no allocation. sh.mu
// is held.
func (b *Batcher) counted(sh *shard[*pool], ck cacheKey, now int64, cost int) *pool {
	hold := int64(b.hold)
	p := sh.m[ck]
	if p == nil {
		h := b.pools.hash(ck.key)
		slot := &b.door[h%uint64(len(b.door))][(h/uint64(len(b.door)))%doorSlots]
		if slot.hash != h || now-slot.at >= hold || now < slot.at {
			*slot = doorSlot{h, now}
			return nil
		}
		*slot = doorSlot{}
		p = &pool{}
		if !b.pools.put(sh, ck, p, now, (*pool).expiry) {
			return nil
		}
		p.count(now, hold, 1) // the first time
	}
	p.count(now, hold, cost)
	return p
}

// reserve is AllowN when this server's reservation cannot cover the
// request: it takes a new batch from the store. sh.mu is held, and
// released.
func (b *Batcher) reserve(ctx context.Context, sh *shard[*pool], ck cacheKey, now int64, cost int) (sluice.Result, error) {
	key, lim := ck.key, ck.lim
	giveBack := 0
	if p := sh.m[ck]; p != nil {
		// Expired or too small: return what is left, if its window is
		// still open; else it stays charged to the window that ended.
		if now < p.refundBy {
			giveBack = p.units
		}
		p.units = 0
	}
	var p *pool
	n := cost
	if b.lease == 0 {
		p = b.begin(sh, ck, now)
		n = max(min(b.batch, lim.Capacity()), cost)
	} else {
		// A decision of its own cost alone, with nothing to give back,
		// moves no units this server keeps: the requests it denies need
		// not wait for it.
		p = b.counted(sh, ck, now, cost)
		if p != nil {
			n = max(min(p.recent(now, int64(b.hold)), b.most(lim)), cost)
			if n < 2 {
				n = cost
			}
			if n > cost || giveBack > 0 {
				p.moving++
				p.coming += n - cost
			} else {
				p = nil
			}
		}
	}
	sh.mu.Unlock()

	b.refund(ctx, key, lim, giveBack)
	res, later, err := b.take(ctx, sh, ck, p, now, n)
	for err == nil && !res.Allowed && n > cost {
		// Not a whole batch left: take what is left if it covers this
		// request, else ask for just this request, so that a denial's
		// RetryAfter is the one for its own cost.
		if res.Remaining > cost {
			n = min(res.Remaining, n-1)
		} else {
			n = cost
		}
		res, later, err = b.take(ctx, sh, ck, p, now, n)
	}
	if later {
		return res, err // the answer lands without this request (see take)
	}
	if err != nil || !res.Allowed {
		sh.mu.Lock()
		b.end(sh, ck, p)
		sh.mu.Unlock()
		if err != nil {
			return res, err
		}
		return b.retry(ctx, sh, ck, now, cost, res)
	}
	if left := n - cost; left > 0 {
		b.keep(ctx, sh, ck, now, left, res)
	}
	sh.mu.Lock()
	b.end(sh, ck, p)
	sh.mu.Unlock()
	res.Remaining += n - cost
	return res, nil
}

// take asks the inner limiter for n units of ck for a request sent at
// sent, on a context that the request's end does not cancel (bounded as a
// refund's is): a remote store may count a reservation whose answer comes
// after the request gave up, and a batch counted for nobody would stay
// charged, never spent nor given back. When ctx ends first, take returns
// later true and ctx's error: the answer then lands on a goroutine of its
// own, which holds its units (none spent) as keep does and ends p. A
// context that cannot end costs no goroutine.
func (b *Batcher) take(ctx context.Context, sh *shard[*pool], ck cacheKey, p *pool, sent int64, n int) (res sluice.Result, later bool, err error) {
	if ctx.Done() == nil {
		res, err = b.inner.AllowN(ctx, ck.key, ck.lim, n)
		return res, false, err
	}
	type answer struct {
		res sluice.Result
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		actx, cancel := refundContext(ctx)
		res, err := b.inner.AllowN(actx, ck.key, ck.lim, n)
		cancel()
		answered <- answer{res, err}
	}()
	select {
	case a := <-answered:
		return a.res, false, a.err
	case <-ctx.Done():
	}
	go func() {
		a := <-answered
		if a.err == nil && a.res.Allowed {
			b.keep(context.WithoutCancel(ctx), sh, ck, sent, n, a.res)
		}
		sh.mu.Lock()
		b.end(sh, ck, p)
		sh.mu.Unlock()
	}()
	return sluice.Result{}, true, ctx.Err()
}

// keep pools the left units of a reservation of ck that was sent at sent
// and answered res, or gives them back to the store at once when they are
// more than Batch−1 held, when the table has no room for them, or after
// Release.
func (b *Batcher) keep(ctx context.Context, sh *shard[*pool], ck cacheKey, sent int64, left int, res sluice.Result) {
	landed := b.pools.now()
	until := sent + int64(b.hold)
	if ck.lim.Algorithm == sluice.FixedWindow {
		// Never spend a window's units in the next one.
		until = min(until, sent+int64(res.ResetAfter))
	}
	reset := sent + int64(res.ResetAfter)
	by := refundBy(ck.lim, sent, landed, res)
	ret := 0 // units to give back to the store at once
	sh.mu.Lock()
	q := sh.m[ck]
	if q == nil && !b.released.Load() {
		q = &pool{}
		if !b.pools.put(sh, ck, q, sent, (*pool).expiry) {
			q = nil
		}
	}
	switch {
	case q == nil || b.released.Load():
		ret = left // no room to hold them, or no more holding
	case q.units == 0:
		q.units, q.left, q.until, q.reset, q.refundBy = left, res.Remaining, until, reset, by
	default:
		// Another request reserved meanwhile: pool both, but hold no
		// more than Batch−1 units; the rest go back.
		q.units += left
		q.left = min(q.left, res.Remaining)
		q.until = min(q.until, until)
		q.reset = max(q.reset, reset)
		q.refundBy = min(q.refundBy, by)
	}
	if q != nil && b.rf != nil {
		if extra := q.units - max(b.most(ck.lim)-1, 0); extra > 0 {
			q.units -= extra
			ret += extra
		}
	}
	if landed >= by {
		ret = 0 // the window is ending: the units stay charged to it
	}
	sh.mu.Unlock()
	b.refund(ctx, ck.key, ck.lim, ret) // before end, so a denial waits for it
}

// refundBy returns the instant (Unix ns, on the Batcher's clock) from which
// units of lim reserved by a request sent at sent, whose answer res landed
// at landed, may no longer go back to the store, because the store would
// count them off a later window than the one they were charged to:
//
//   - a fixed window (calendar or not): the end of the window, the earlier
//     of this clock's (algorithm.FixedWindowPeriod) and the store's
//     (sent+ResetAfter, which the store's clock decides);
//   - a sliding window: the end of its current window of Period, or of
//     its current sub-window of Period/Buckets with more than one, on this
//     clock;
//   - a sliding log: Period after sent, when the reserved entries leave the
//     log;
//   - a token or leaky bucket: never; a refund is always valid there, and
//     the store never fills a bucket past full.
//
// A window's instant is brought forward by the reservation's round trip,
// so that a refund sent before it lands before the window ends as long as
// it travels no slower than the reservation did.
func refundBy(lim sluice.Limit, sent, landed int64, res sluice.Result) int64 {
	rtt := max(landed-sent, 0)
	switch lim.Algorithm {
	case sluice.FixedWindow:
		_, end := algorithm.FixedWindowPeriod(lim, sent)
		return min(end, sent+int64(res.ResetAfter)) - rtt
	case sluice.SlidingWindow:
		g := lim.Period / time.Duration(max(lim.Buckets, 1))
		_, end := algorithm.FixedWindowPeriod(sluice.Limit{Period: g}, sent)
		return end - rtt
	case sluice.SlidingLog:
		return sent + int64(lim.Period) - rtt
	default:
		return math.MaxInt64
	}
}

// maxWaits bounds how many times a denied request waits for units in
// motion before the denial stands.
const maxWaits = 4

// retry is AllowN after the store denied the request: while units of this
// server are in motion for the key, wait for them to land, then spend from
// the reservation or ask the store again.
func (b *Batcher) retry(ctx context.Context, sh *shard[*pool], ck cacheKey, now int64, cost int, denied sluice.Result) (sluice.Result, error) {
	for range maxWaits {
		sh.mu.Lock()
		if res, ok := spend(sh, ck, now, cost, 0); ok {
			sh.mu.Unlock()
			return res, nil
		}
		p := sh.m[ck]
		if p == nil || p.moving == 0 {
			sh.mu.Unlock()
			return denied, nil
		}
		if !waitLanded(ctx, sh, p) {
			sh.mu.Unlock()
			return denied, nil
		}
		res, ok := spend(sh, ck, now, cost, 0)
		sh.mu.Unlock()
		if ok {
			return res, nil
		}
		if b.rf == nil {
			continue // units go back to the store only by a refund
		}
		// What landed may have gone back to the store.
		res, err := b.inner.AllowN(ctx, ck.key, ck.lim, cost)
		if err != nil || res.Allowed {
			return res, err
		}
		denied = res
	}
	return denied, nil
}

// spend takes cost units from ck's reservation if it holds them and has
// not expired, and counts them in intervals of count ns (leases) unless
// count is 0. sh.mu is held.
func spend(sh *shard[*pool], ck cacheKey, now int64, cost int, count int64) (sluice.Result, bool) {
	p := sh.m[ck]
	if p == nil || now >= p.until || p.units < cost {
		return sluice.Result{}, false
	}
	if count > 0 {
		p.count(now, count, cost)
	}
	p.units -= cost
	return sluice.Result{Allowed: true, Remaining: p.units + p.left, ResetAfter: time.Duration(max(p.reset-now, 0))}, true
}

// begin records that a request is moving units of ck (reserving, or giving
// back an expired reservation), and returns the pool it counts in, or nil if
// the table has no room to track it. sh.mu is held.
func (b *Batcher) begin(sh *shard[*pool], ck cacheKey, now int64) *pool {
	p := sh.m[ck]
	if p == nil {
		p = &pool{}
		if !b.pools.put(sh, ck, p, now, (*pool).expiry) {
			return nil
		}
	}
	p.moving++
	return p
}

// end records that the request that began p has landed its units, wakes
// the requests waiting for it, and drops p if it is empty and idle (with
// leases, once its use no longer counts). sh.mu is held.
func (b *Batcher) end(sh *shard[*pool], ck cacheKey, p *pool) {
	if p == nil {
		return
	}
	p.moving--
	if p.moving == 0 {
		p.coming = 0
	}
	if p.landed != nil {
		close(p.landed)
		p.landed = nil
	}
	if p.moving == 0 && p.units == 0 && sh.m[ck] == p && (b.lease == 0 || p.kept <= b.pools.now()) {
		b.pools.del(sh, ck)
	}
}

// refund gives n units of key back to the inner limiter, if it can take
// them, even when the request's context has ended.
func (b *Batcher) refund(ctx context.Context, key string, lim sluice.Limit, n int) {
	if n <= 0 || b.rf == nil {
		return
	}
	rctx, cancel := refundContext(ctx)
	b.rf.RefundN(rctx, key, lim, n)
	cancel()
}

// releaseWorkers is how many refunds Release makes at once.
const releaseWorkers = 8

// Released is what Release did with the units the Batcher held.
type Released struct {
	// Keys is how many keys (each under one limit) had units given back.
	Keys int
	// Units is how many units went back to the inner limiter.
	Units int
	// Failed is how many units could have gone back but did not: the
	// refund failed, ctx ended first, or the inner limiter takes no
	// refunds.
	Failed int
	// Ended is how many units were held for windows that had ended (or
	// were about to, see refundBy): they stay charged to those windows, as
	// if spent there.
	Ended int
}

// Release stops batching and gives back to the inner limiter every unit
// this Batcher holds whose window is still open, releaseWorkers refunds at
// a time, until ctx ends; call it before the inner limiter closes, at
// shutdown. From its start every decision goes to the inner limiter
// directly, and a reservation still on its way gives its left units back
// when it lands (if the window is open), so nothing is held after it. It
// returns what it did, and the first refund's error, if any (ctx's when
// ctx ended first). Calling it again gives back nothing more.
func (b *Batcher) Release(ctx context.Context) (Released, error) {
	b.released.Store(true)
	list, out := b.takeAll()
	if len(list) == 0 {
		return out, nil
	}
	if b.rf == nil {
		for _, h := range list {
			out.Failed += h.units
		}
		return out, fmt.Errorf("relief: %T takes no refunds: %w", b.inner, errors.ErrUnsupported)
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	work := make(chan heldUnits)
	for range min(releaseWorkers, len(list)) {
		wg.Go(func() {
			for h := range work {
				err := ctx.Err()
				if err == nil {
					err = b.rf.RefundN(ctx, h.ck.key, h.ck.lim, h.units)
				}
				mu.Lock()
				if err != nil {
					out.Failed += h.units
					firstErr = cmp.Or(firstErr, err)
				} else {
					out.Keys++
					out.Units += h.units
				}
				mu.Unlock()
			}
		})
	}
	for _, h := range list {
		work <- h
	}
	close(work)
	wg.Wait()
	return out, firstErr
}

// ReleaseAndLog is Release at a server's shutdown, before the inner
// (remote) limiter closes: a server that stops without it leaves up to
// Batch−1 units per key charged and never spent until their window ends.
// It logs at Info what went back (units, keys) and what did not
// (units_not_refunded, units_of_ended_windows, and the error, if any).
func (b *Batcher) ReleaseAndLog(ctx context.Context, log *slog.Logger) {
	got, err := b.Release(ctx)
	attrs := []any{"units", got.Units, "keys", got.Keys, "units_not_refunded", got.Failed, "units_of_ended_windows", got.Ended}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	log.Info("reservations refunded at shutdown", attrs...)
}

// heldUnits is a refund Release makes.
type heldUnits struct {
	ck    cacheKey
	units int
}

// takeAll empties every pool, and returns the units to give back (those
// whose window is open) and a Released that counts the others as Ended.
// Pools with units in motion stay, empty, for their requests to land in.
func (b *Batcher) takeAll() ([]heldUnits, Released) {
	var list []heldUnits
	var out Released
	now := b.pools.now()
	for i := range b.pools.shards {
		sh := &b.pools.shards[i]
		sh.mu.Lock()
		for ck, p := range sh.m {
			switch {
			case p.units <= 0:
			case now < p.refundBy:
				list = append(list, heldUnits{ck, p.units})
			default:
				out.Ended += p.units
			}
			p.units = 0
			if p.moving == 0 {
				b.pools.del(sh, ck)
			}
		}
		sh.mu.Unlock()
	}
	return list, out
}
