// Package memstore is an in-memory sluice.Limiter for every algorithm: N
// shards, each a mutex and one map per algorithm, so that keys spread over
// many locks and a decision on a key the store already holds allocates
// nothing.
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
)

// Store is a sharded in-memory limiter. It is safe for concurrent use. Call
// Close to stop its janitor.
type Store struct {
	clock    sluice.Clock
	base     time.Time
	baseNS   int64
	seed     maphash.Seed
	shards   []shard
	mask     uint64
	perShard int

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// shard holds one map per algorithm under one mutex. n counts the keys of all
// maps.
type shard struct {
	mu sync.Mutex
	tb map[string]*algorithm.TokenBucket
	fw map[string]*algorithm.FixedWindow
	sw map[string]*algorithm.SlidingWindow
	sl map[string]*algorithm.SlidingLog
	lb map[string]*algorithm.LeakyBucket
	n  int
	// lim is the limit this shard validated last, and interval its token
	// bucket emission interval: a shard that sees one limit again and again
	// validates it once and divides once.
	lim      sluice.Limit
	interval int64
	_        [64]byte // keep neighbouring shards' mutexes off one cache line
}

var (
	_ sluice.Limiter  = (*Store)(nil)
	_ sluice.Refunder = (*Store)(nil)
)

// New returns a Store configured by cfg and starts its janitor.
func New(cfg Config) *Store {
	n := cfg.Shards
	if n <= 0 {
		n = DefaultShards
	}
	pow := 1
	for pow < n {
		pow <<= 1
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
		mask:     uint64(pow - 1),
		perShard: max((maxKeys+pow-1)/pow, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.baseNS = s.base.UnixNano()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.tb = make(map[string]*algorithm.TokenBucket)
		sh.fw = make(map[string]*algorithm.FixedWindow)
		sh.sw = make(map[string]*algorithm.SlidingWindow)
		sh.sl = make(map[string]*algorithm.SlidingLog)
		sh.lb = make(map[string]*algorithm.LeakyBucket)
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

// now returns the current instant in Unix nanoseconds.
func (s *Store) now() int64 {
	if s.clock != nil {
		return s.clock.Now().UnixNano()
	}
	return s.baseNS + int64(time.Since(s.base))
}

func (s *Store) shard(key string) *shard {
	return &s.shards[maphash.String(s.seed, key)&s.mask]
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
	sh := s.shard(key)
	sh.mu.Lock()
	if lim != sh.lim {
		if err := lim.Validate(); err != nil {
			sh.mu.Unlock()
			return sluice.Result{}, err
		}
		sh.lim, sh.interval = lim, algorithm.Interval(lim)
	}
	var res sluice.Result
	switch lim.Algorithm {
	case sluice.TokenBucket:
		res = lookup(sh, sh.tb, key, now, s.perShard).TakeInterval(now, lim, sh.interval, cost)
	case sluice.FixedWindow:
		res = lookup(sh, sh.fw, key, now, s.perShard).Take(now, lim, cost)
	case sluice.SlidingWindow:
		res = lookup(sh, sh.sw, key, now, s.perShard).Take(now, lim, cost)
	case sluice.SlidingLog:
		res = lookup(sh, sh.sl, key, now, s.perShard).Take(now, lim, cost)
	case sluice.LeakyBucket:
		res = lookup(sh, sh.lb, key, now, s.perShard).Take(now, lim, cost)
	}
	sh.mu.Unlock()
	return res, nil
}

// RefundN gives cost units back to key's allowance under lim, never beyond a
// fresh key's. A key the store does not hold is left alone.
func (s *Store) RefundN(_ context.Context, key string, lim sluice.Limit, cost int) error {
	if err := sluice.Check(key, lim, cost); err != nil {
		return err
	}
	now := s.now()
	sh := s.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch lim.Algorithm {
	case sluice.TokenBucket:
		if st, ok := sh.tb[key]; ok {
			st.Refund(now, lim, cost)
		}
	case sluice.FixedWindow:
		if st, ok := sh.fw[key]; ok {
			st.Refund(now, lim, cost)
		}
	case sluice.SlidingWindow:
		if st, ok := sh.sw[key]; ok {
			st.Refund(now, lim, cost)
		}
	case sluice.SlidingLog:
		if st, ok := sh.sl[key]; ok {
			st.Refund(now, lim, cost)
		}
	case sluice.LeakyBucket:
		if st, ok := sh.lb[key]; ok {
			st.Refund(now, lim, cost)
		}
	}
	return nil
}

// expirer is what every algorithm's state offers to the sweep and to
// eviction.
type expirer interface{ Expires() int64 }

// lookup returns key's state in m, creating a fresh one if m has none. A new
// key is cloned, so that the map never pins a caller's larger buffer, and may
// evict another key first if the shard is full. States are held by pointer so
// that a decision is one map lookup and an update in place.
func lookup[S any](sh *shard, m map[string]*S, key string, now int64, limit int) *S {
	if st := m[key]; st != nil {
		return st
	}
	if sh.n >= limit {
		sh.evict(now)
	}
	st := new(S)
	m[strings.Clone(key)] = st
	sh.n++
	return st
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

// Sweep drops every key whose state is indistinguishable from a fresh key's
// and returns how many it dropped. The janitor calls it every SweepInterval.
func (s *Store) Sweep() int {
	dropped := 0
	for i := range s.shards {
		now := s.now()
		sh := &s.shards[i]
		sh.mu.Lock()
		d := sweep(sh.tb, now) + sweep(sh.fw, now) + sweep(sh.sw, now) + sweep(sh.lb, now) + sweep(sh.sl, now)
		sh.n -= d
		sh.mu.Unlock()
		dropped += d
	}
	return dropped
}

func sweep[S expirer](m map[string]S, now int64) int {
	d := 0
	for k, st := range m {
		if st.Expires() <= now {
			delete(m, k)
			d++
		}
	}
	return d
}

// evict drops one key to make room: the sampled key closest to fresh.
func (sh *shard) evict(now int64) {
	var (
		victim string
		exp    int64 = 1<<63 - 1
		from   int
		found  bool
	)
	consider := func(k string, e int64, m int) bool {
		if !found || e < exp {
			victim, exp, from, found = k, e, m, true
		}
		return e <= now // an expired key is as good as it gets
	}
	_ = sample(sh.tb, 0, consider) || sample(sh.fw, 1, consider) ||
		sample(sh.sw, 2, consider) || sample(sh.lb, 3, consider) ||
		sample(sh.sl, 4, consider)
	if !found {
		return
	}
	switch from {
	case 0:
		delete(sh.tb, victim)
	case 1:
		delete(sh.fw, victim)
	case 2:
		delete(sh.sw, victim)
	case 3:
		delete(sh.lb, victim)
	case 4:
		delete(sh.sl, victim)
	}
	sh.n--
}

// sample offers up to evictionSample entries of m, from the random place Go
// starts a map iteration, and reports whether consider was satisfied.
func sample[S expirer](m map[string]S, id int, consider func(string, int64, int) bool) bool {
	n := 0
	for k, st := range m {
		if consider(k, st.Expires(), id) {
			return true
		}
		if n++; n >= evictionSample {
			break
		}
	}
	return false
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
