// Package memstore is an in-memory sluice.Limiter for every algorithm: N
// shards, each a mutex and one hash table per algorithm, so that keys spread
// over many locks and a decision on a key the store already holds hashes the
// key once and allocates nothing.
//
// Memory is bounded two ways. A key whose state has become indistinguishable
// from a fresh key's (a full bucket, an empty window) is dropped by a janitor
// that sweeps every SweepInterval, so an idle client costs nothing. And the
// store never holds more than about MaxKeys keys: when a shard is full, a new
// key evicts the sampled key that is closest to fresh (the earliest to
// expire, Redis's volatile-ttl policy over a sample of 8 per algorithm).
// Evicting that key forgets the least: it would have been dropped soonest
// anyway, and a key that is limited now has a later expiry than one that
// was merely used.
//
// MaxKeys bounds keys, not bytes: a sliding log key holds up to 8·Rate bytes
// of timestamps (8 MiB at sluice.MaxLogRate), so bound memory for sliding
// logs with MaxKeys × 8 × Rate in mind, or use the sliding window counter.
package memstore

import (
	"context"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Config configures a Store. The zero Config is usable: every field has a
// default.
type Config struct {
	// Clock tells the time; nil means the system's monotonic clock (wall
	// time read once, then advanced by the monotonic clock).
	Clock sluice.Clock
	// Shards is the number of shards, rounded up to a power of two.
	// Default 64.
	Shards int
	// MaxKeys bounds the number of keys held. Default 1,000,000. Each shard
	// holds at most MaxKeys/Shards (rounded up) keys.
	MaxKeys int
	// SweepInterval is how often the janitor drops idle keys. Default 30s;
	// a negative value disables the janitor (call Sweep yourself).
	SweepInterval time.Duration
}

// Default values of Config's fields.
const (
	DefaultShards        = 64
	DefaultMaxKeys       = 1_000_000
	DefaultSweepInterval = 30 * time.Second
	evictionSample       = 8
	maxShards            = 1 << 16
)

// Store is a sharded in-memory limiter. It is safe for concurrent use. Call
// Close to stop its janitor.
type Store struct {
	clock    sluice.Clock
	base     time.Time
	baseNS   int64
	seed     maphash.Seed
	shards   []shard
	shift    uint // a key's shard is its hash >> shift
	perShard int

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// shard holds one table per algorithm under one mutex. n counts the keys of
// all tables.
type shard struct {
	mu sync.Mutex
	tb table[algorithm.TokenBucket]
	fw table[algorithm.FixedWindow]
	sw table[algorithm.SlidingWindow]
	sl table[algorithm.SlidingLog]
	lb table[algorithm.LeakyBucket]
	n  int
	// lim is the limit this shard validated last, and derived the constant
	// its algorithm derives from it by a division (a token bucket's emission
	// interval, a leaky bucket's milli-rate): a shard that sees one limit
	// again and again validates it once and divides once.
	lim     sluice.Limit
	valid   bool
	derived int64
	_       [64]byte // keep neighbouring shards' mutexes off one cache line
}

var (
	_ sluice.Limiter  = (*Store)(nil)
	_ sluice.Refunder = (*Store)(nil)
)

// New returns a Store configured by cfg and starts its janitor. Call Close
// when done with the store: the janitor keeps it alive until then.
func New(cfg Config) *Store {
	n := cfg.Shards
	if n <= 0 {
		n = DefaultShards
	}
	n = min(n, maxShards)
	pow, bits := 1, uint(0)
	for pow < n {
		pow, bits = pow<<1, bits+1
	}
	maxKeys := cfg.MaxKeys
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	s := &Store{
		clock:    cfg.Clock,
		base:     time.Now(),
		seed:     maphash.MakeSeed(),
		shards:   make([]shard, pow),
		shift:    64 - bits,
		perShard: max(shareOf(maxKeys, pow), 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.baseNS = s.base.UnixNano()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.tb = newTable[algorithm.TokenBucket](s.seed)
		sh.fw = newTable[algorithm.FixedWindow](s.seed)
		sh.sw = newTable[algorithm.SlidingWindow](s.seed)
		sh.sl = newTable[algorithm.SlidingLog](s.seed)
		sh.lb = newTable[algorithm.LeakyBucket](s.seed)
	}
	every := cfg.SweepInterval
	if every == 0 {
		every = DefaultSweepInterval
	}
	if every > 0 {
		go s.janitor(every)
	} else {
		close(s.done)
	}
	return s
}

// shareOf returns ⌈total/n⌉ for positive total and n, without the overflow
// of (total+n−1)/n near the top of int's range.
func shareOf(total, n int) int {
	q := total / n
	if total%n != 0 {
		q++
	}
	return q
}

// now returns the current instant in Unix nanoseconds.
func (s *Store) now() int64 {
	if s.clock != nil {
		return s.clock.Now().UnixNano()
	}
	return s.baseNS + int64(time.Since(s.base))
}

// Allow is shorthand for AllowN(ctx, key, lim, 1).
func (s *Store) Allow(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return s.AllowN(ctx, key, lim, 1)
}

// AllowN spends cost units of key's allowance under lim if they fit. The
// error is only for bad input (see sluice.Check); the context is not
// consulted, since a decision never blocks.
func (s *Store) AllowN(_ context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	capacity := lim.Rate // lim.Capacity(), written out: the call copies lim
	if lim.Algorithm == sluice.TokenBucket || lim.Algorithm == sluice.LeakyBucket {
		capacity = lim.Burst
	}
	if len(key) == 0 || len(key) > sluice.MaxKeyLen || cost < 1 || cost > capacity {
		return sluice.Result{}, sluice.Check(key, lim, cost)
	}
	now := s.now()
	h := maphash.String(s.seed, key)
	return s.shards[h>>s.shift].decide(now, h, key, lim, cost, s.perShard)
}

// decide makes one decision under the shard's lock. The deferred unlock
// keeps a shard usable even if a decision ever panics and is recovered (as
// net/http recovers a handler).
func (sh *shard) decide(now int64, h uint64, key string, lim sluice.Limit, cost, limit int) (sluice.Result, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.valid || lim != sh.lim {
		if err := lim.Validate(); err != nil {
			return sluice.Result{}, err
		}
		sh.lim, sh.valid = lim, true
		switch lim.Algorithm {
		case sluice.TokenBucket:
			sh.derived = algorithm.Interval(lim)
		case sluice.LeakyBucket:
			sh.derived = algorithm.MilliRate(lim)
		}
	}
	switch lim.Algorithm {
	case sluice.TokenBucket:
		return lookup(sh, &sh.tb, h, key, limit).TakeInterval(now, lim, sh.derived, cost), nil
	case sluice.FixedWindow:
		return lookup(sh, &sh.fw, h, key, limit).Take(now, lim, cost), nil
	case sluice.SlidingWindow:
		return lookup(sh, &sh.sw, h, key, limit).Take(now, lim, cost), nil
	case sluice.SlidingLog:
		return lookup(sh, &sh.sl, h, key, limit).Take(now, lim, cost), nil
	default: // sluice.LeakyBucket; Validate rejected anything else
		return lookup(sh, &sh.lb, h, key, limit).TakeRate(now, lim, sh.derived, cost), nil
	}
}

// RefundN gives cost units back to key's allowance under lim, never beyond a
// fresh key's. A key the store does not hold is left alone.
func (s *Store) RefundN(_ context.Context, key string, lim sluice.Limit, cost int) error {
	if err := sluice.Check(key, lim, cost); err != nil {
		return err
	}
	now := s.now()
	h := maphash.String(s.seed, key)
	sh := &s.shards[h>>s.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch lim.Algorithm {
	case sluice.TokenBucket:
		refund(&sh.tb, h, key, now, lim, cost)
	case sluice.FixedWindow:
		refund(&sh.fw, h, key, now, lim, cost)
	case sluice.SlidingWindow:
		refund(&sh.sw, h, key, now, lim, cost)
	case sluice.SlidingLog:
		refund(&sh.sl, h, key, now, lim, cost)
	case sluice.LeakyBucket:
		refund(&sh.lb, h, key, now, lim, cost)
	}
	return nil
}

// refund gives cost units back to key's state in t, if t holds key.
func refund[S any, P interface {
	*S
	Refund(now int64, lim sluice.Limit, cost int)
}](t *table[S], h uint64, key string, now int64, lim sluice.Limit, cost int) {
	if st := t.get(h, key); st != nil {
		P(st).Refund(now, lim, cost)
	}
}

// lookup returns key's state in t, inserting a fresh one if t has none. A
// new key is cloned, so that the table never pins a caller's larger buffer,
// and may evict another key first if the shard is full. The pointer is valid
// while the shard's lock is held and nothing else is inserted or deleted.
func lookup[S any](sh *shard, t *table[S], h uint64, key string, limit int) *S {
	if st := t.get(h, key); st != nil {
		return st
	}
	if sh.n >= limit {
		sh.evict(h)
	}
	sh.n++
	return t.insert(h, strings.Clone(key))
}

// Len returns the number of keys the store holds, idle ones included until
// the next sweep.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// Sweep drops every key whose state is indistinguishable from a fresh key's,
// gives the memory of tables left sparse back, and returns how many keys it
// dropped. The janitor calls it every SweepInterval.
func (s *Store) Sweep() int {
	dropped := 0
	for i := range s.shards {
		now := s.now()
		sh := &s.shards[i]
		sh.mu.Lock()
		d := sweep(&sh.tb, now) + sweep(&sh.fw, now) + sweep(&sh.sw, now) + sweep(&sh.sl, now) + sweep(&sh.lb, now)
		sh.n -= d
		sh.mu.Unlock()
		dropped += d
	}
	return dropped
}

// evict drops one key to make room: of a sample of evictionSample keys per
// algorithm, taken from the slot the new key's hash h points at on, the one
// closest to fresh (the earliest to expire).
func (sh *shard) evict(h uint64) {
	var (
		best  int64
		which = -1
		at    uint64
	)
	consider := func(i uint64, e int64, ok bool, id int) {
		if ok && (which < 0 || e < best) {
			best, which, at = e, id, i
		}
	}
	i, e, ok := sample(&sh.tb, h, evictionSample)
	consider(i, e, ok, 0)
	i, e, ok = sample(&sh.fw, h, evictionSample)
	consider(i, e, ok, 1)
	i, e, ok = sample(&sh.sw, h, evictionSample)
	consider(i, e, ok, 2)
	i, e, ok = sample(&sh.sl, h, evictionSample)
	consider(i, e, ok, 3)
	i, e, ok = sample(&sh.lb, h, evictionSample)
	consider(i, e, ok, 4)
	switch which {
	case 0:
		sh.tb.evictAt(at)
	case 1:
		sh.fw.evictAt(at)
	case 2:
		sh.sw.evictAt(at)
	case 3:
		sh.sl.evictAt(at)
	case 4:
		sh.lb.evictAt(at)
	default:
		return
	}
	sh.n--
}

func (s *Store) janitor(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Close stops the janitor and waits for it to exit. The store remains usable
// without it. Close is idempotent and always returns nil.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	return nil
}
