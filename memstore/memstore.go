// Package memstore is an in-memory sluice.Limiter for every algorithm: N
// shards, each a mutex and one hash table per algorithm, so that keys spread
// over many locks and a decision on a key the store already holds hashes the
// key once and allocates nothing.
//
// Memory is bounded in bytes. A key whose state has become indistinguishable
// from a fresh key's (a full bucket, an empty window) is dropped by a janitor
// that sweeps every SweepInterval, so an idle client costs nothing. And the
// store never holds more than MaxBytes (default 256 MiB) of keys, states,
// sliding log entries, table slots and its sketch of evicted keys, nor more
// than MaxKeys keys: when a shard is at either bound, a new key evicts the
// sampled key that is closest to fresh (the earliest to expire, Redis's
// volatile-ttl policy over a sample of 8 per algorithm; a key already fresh
// expires at 0 or in the past, so it goes first), and a sliding log that
// grows past the budget evicts others the same way, and coarsens its slot
// rather than outgrow its shard's share. Evicting that key
// forgets the least: it would have been dropped soonest anyway, and a key
// that is limited now has a later expiry than one that was merely used.
//
// Eviction never gives an allowance back. A key evicted before its state is
// fresh leaves, in its shard's sketch of evicted keys, the instant its state
// would have become fresh and the units it held; a key created later with
// the same hash starts from a state rebuilt from them, at least as spent as
// the one evicted (exactly it for a token bucket, a fixed window and a
// leaky bucket; for a sliding window its units all in one window, for a
// sliding log all at its newest instant). So a client that spends its key
// and then floods the store with distinct keys to have it evicted finds it
// as spent when it comes back. The sketch is a fixed array of 16-byte cells
// (an instant, a 32-bit fingerprint, the units), four to a bucket, two
// buckets a key, cuckoo-style: an eighth of each shard's budget at most,
// and at most two cells per key MaxKeys allows, rounded down to a power of
// two of buckets (16 MiB, 1,048,576 cells, with the defaults; 128 KiB,
// 8,192 cells, with a MaxBytes of 1 MiB and 64 shards). It is counted in
// Stats().Bytes from the start and allocated at the first eviction it
// remembers. A cell frees itself when its instant passes.
//
// Accuracy: a collision only ever makes a key look more spent, never less.
// Up to about 0.9 live evicted keys a cell, no key starts spent that was
// never evicted (measured: none of 100,000; the fingerprints alone match
// about once in 2.7·10⁸ lookups). Past that the sketch merges keys into a
// wildcard cell of their bucket, which every key of the bucket matches:
// 2.2% of new keys start spent at 0.95 keys a cell, 16% at 1, 80% at 1.5
// (TestSketchFalseSpentRateByLoad). A key that matches a wildcard starts as
// spent as the most spent of the keys merged there, until their reset. That
// is the price of never forgetting: a flood of distinct spent keys, within
// one period, larger than the store and its sketch hold (MaxKeys plus about
// 0.9 keys a cell) turns into refusals for new keys of the saturated
// buckets, where NGINX's limit_req, whose zone is full, refuses every new
// key (503); below it, no other key is touched. Stats' Remembered and
// Merged count the evictions the sketch took in and those it merged: a
// rising Merged means the budget is too small for the keys in flight.
// Stats reports the keys, the bytes and the evictions.
package memstore

import (
	"context"
	"hash/maphash"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// Config configures a Store. The zero Config is usable: every field has a
// default.
type Config struct {
	// Clock tells the time; nil means the system's monotonic clock (wall
	// time read once, at New, then advanced by the monotonic clock, so that
	// a step of the wall clock after New moves no decision). On Linux on
	// amd64, where the kernel keeps time with the CPU's time-stamp counter,
	// the store reads that counter and scales it, calibrated against the
	// monotonic clock: one instruction instead of a call into the kernel's
	// clock, within about 600 ns of it (see tsc.go). A Clock given here is
	// read as it is at every decision: a step of it is a step of the
	// store's time (a token bucket spent before a step back stays spent).
	Clock sluice.Clock
	// Shards is the number of shards, rounded up to a power of two.
	// Default 64.
	Shards int
	// MaxBytes bounds the heap the store holds, in bytes: every key's bytes,
	// its state and its table slot (the slot arrays are counted whole,
	// spare slots included), a sliding log's entries, a moments counter's
	// buffer, and each shard's sketch of evicted keys (at most an eighth
	// of its share, counted from the start; see the package doc). Default
	// DefaultMaxBytes, 256 MiB. Each shard holds at most MaxBytes/Shards
	// (rounded up), except that a shard always keeps at least one key: a
	// budget smaller than Shards empty tables (about 2 KB each) holds one
	// key per shard. A sliding log holds at most its limit's LogEntries
	// entries of 16 bytes (2 MiB under config's default max_log_entries),
	// and no more than its shard's share allows: a growing log evicts the
	// shard's other keys, and a log whose limit needs more entries than
	// the share holds with none of them (at least 64 entries, 1 KiB) is
	// held to that room, with a coarser slot (see
	// algorithm.SlidingLog.TakeAtMost): the units of each slot of
	// Period/(room−1) share an entry, which makes it refuse up to one slot
	// sooner, never admit more. It is held whenever its ring is nearly
	// full, from its first entry on (an empty ring counts as full), so
	// such a log is coarse even while its entries would still fit. The Go runtime lets the heap grow to about twice
	// what is live before it collects (GOGC=100), so allow about
	// 2·MaxBytes of memory for the store.
	//
	// Why 256 MiB: at about 100 bytes per key of 16 bytes it holds more
	// than the default MaxKeys, so ordinary keys are bounded by count as
	// before; keys of 4 KB (sluice.MaxKeyLen) cost about 4.2 KB each and are
	// bounded at about 60,000; and 2·256 MiB fits in the 1 GiB of memory a
	// server container is commonly given, with room for the rest.
	MaxBytes int64
	// MaxKeys bounds the number of keys held, whatever their size. Default
	// DefaultMaxKeys, 1,000,000. Each shard holds at most MaxKeys/Shards
	// (rounded up) keys. Both bounds apply: the first reached evicts.
	// MaxBytes is the one that bounds memory; MaxKeys keeps a bound on the
	// count (and on a sweep's work) for operators who think in keys.
	MaxKeys int
	// SweepInterval is how often the janitor drops idle keys. Default 30s;
	// a negative value disables the janitor (call Sweep yourself).
	SweepInterval time.Duration
	// ClockResolution, when positive, makes decisions read a coarse clock:
	// one goroutine reads Clock (or the monotonic clock) every
	// ClockResolution and decisions load that reading, which costs an
	// atomic load instead of a clock read. The price is an error of one
	// resolution, always late, never early: a token bucket refills up to
	// ClockResolution late, and over any span L of time the store admits
	// at most what it admits over L+ClockResolution with the exact clock;
	// a fixed or sliding window's boundaries move up to ClockResolution
	// late. Values below MinClockResolution are raised to it; choose one
	// well below the shortest Period in use (100µs against periods of a
	// second or more is an error of 1/10,000 of a period). The bound holds
	// while the goroutine gets a CPU every resolution; on a loaded machine
	// its wait adds to the lag. On Linux the goroutine sleeps on its own
	// thread in nanosleep; elsewhere on the runtime's timers, which may
	// serve a resolution under a millisecond at about a millisecond.
	//
	// The goroutine costs CPU whether or not the store decides: a wake-up
	// every resolution (BENCHMARKS.md measures it against what it saves;
	// it pays only at millions of decisions per second). It stops at
	// Close, after which decisions read the exact clock. Zero, the
	// default, reads the exact clock at every decision.
	ClockResolution time.Duration
}

// MinClockResolution is the finest Config.ClockResolution: below it the
// publishing goroutine would cost more CPU than the clock reads it saves.
const MinClockResolution = 10 * time.Microsecond

// Default values of Config's fields.
const (
	DefaultShards        = 64
	DefaultMaxKeys       = 1_000_000
	DefaultMaxBytes      = 256 << 20
	DefaultSweepInterval = 30 * time.Second
	evictionSample       = 8
	maxShards            = 1 << 16
)

// Store is a sharded in-memory limiter. It is safe for concurrent use. Call
// Close to stop its janitor. Its zero value is not usable (it has no
// shards); make one with New.
type Store struct {
	clock    sluice.Clock
	base     time.Time
	baseNS   int64
	seed     maphash.Seed
	shards   []shard
	shift    uint // a key's shard is its hash >> shift
	maxKeys  int
	maxBytes int64

	// coarse is the coarse clock (Config.ClockResolution), or noCoarse,
	// whose reading is always 0, when the store has none; coarseDone is
	// closed when its goroutine has stopped.
	coarse     *coarseClock
	coarseDone chan struct{}
	resolution time.Duration
	// tsc reads the exact clock through the CPU's counter (tsc.go) where
	// the kernel keeps time with it and Clock is nil; nil elsewhere.
	tsc *tscClock

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// shard holds one table per algorithm under one mutex. n counts the keys of
// all tables; maxKeys and maxBytes are the shard's share of the store's
// bounds.
//
// A new algorithm adds its table here, its entry in init, and its case in
// decide; every other operation goes through tables.
type shard struct {
	mu sync.Mutex
	tb stateTable[algorithm.TokenBucket, *algorithm.TokenBucket]
	fw stateTable[algorithm.FixedWindow, *algorithm.FixedWindow]
	sw stateTable[algorithm.SlidingWindow, *algorithm.SlidingWindow]
	sl stateTable[algorithm.SlidingLog, *algorithm.SlidingLog]
	lb stateTable[algorithm.LeakyBucket, *algorithm.LeakyBucket]
	// sb holds the sliding windows with more than one bucket, whose state
	// is another type than the two-window counter's: tables holds it
	// after the algorithms' own, at bucketsTable (see tableOf).
	sb stateTable[algorithm.SlidingBuckets, *algorithm.SlidingBuckets]
	// sm holds the sliding windows with moments, at momentsTable: a
	// 32-byte state and a buffer sized by k and d on the heap, counted
	// in the shard's bytes as a sliding log's ring is.
	sm stateTable[algorithm.SlidingMoments, *algorithm.SlidingMoments]
	// tables holds the tables above by sluice.Algorithm, for the operations
	// that treat every algorithm alike: refund, sweep, evict; counts holds
	// their byte counts, for bytes.
	tables []states
	counts []*tableBytes
	n      int

	maxKeys   int
	maxBytes  int64
	evictions uint64 // keys evicted to stay within the bounds
	swept     uint64 // idle keys dropped by sweeps
	// mem remembers what the keys evicted before their state was fresh had
	// spent, so that they come back no less spent (evicted.go).
	mem sketch
	// lim is the limit this shard validated last, and derived the constant
	// its algorithm derives from it by a division (algorithm.Decider's
	// Prepare: a token bucket's emission interval, a leaky bucket's
	// milli-rate): a shard that sees one limit again and again validates it
	// once and divides once.
	lim     sluice.Limit
	valid   bool
	derived int64
	_       [64]byte // keep neighbouring shards' mutexes off one cache line
}

var (
	_ sluice.Limiter  = (*Store)(nil)
	_ sluice.Refunder = (*Store)(nil)
	_ sluice.Peeker   = (*Store)(nil)
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
	maxBytes := cfg.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	s := &Store{
		clock:    cfg.Clock,
		base:     time.Now(),
		seed:     maphash.MakeSeed(),
		shards:   make([]shard, pow),
		shift:    64 - bits,
		maxKeys:  maxKeys,
		maxBytes: maxBytes,
		coarse:   &noCoarse,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	s.baseNS = s.base.UnixNano()
	if cfg.Clock == nil && tscKernel() && !timeStandsStill() {
		s.tsc = newTSCClock(rdtsc, s.monoNow)
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.init(s.seed)
		sh.maxKeys = max(shareOf(maxKeys, pow), 1)
		sh.maxBytes = max(shareOf(maxBytes, int64(pow)), 1)
		sh.mem.n = sketchSize(sh.maxBytes, sh.maxKeys)
	}
	if r := cfg.ClockResolution; r > 0 {
		s.coarse = newCoarseClock(s.exactNow)
		s.coarseDone = make(chan struct{})
		s.resolution = max(r, MinClockResolution)
		go s.coarse.run(s.resolution, s.stop, s.coarseDone)
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

// init makes the shard's empty tables and lists them in tables.
func (sh *shard) init(seed maphash.Seed) {
	sh.tables = []states{
		sluice.TokenBucket:   sh.tb.init(seed),
		sluice.FixedWindow:   sh.fw.init(seed),
		sluice.SlidingWindow: sh.sw.init(seed),
		sluice.SlidingLog:    sh.sl.init(seed),
		sluice.LeakyBucket:   sh.lb.init(seed),
	}
	sh.tables = append(sh.tables, sh.sb.init(seed)) // at bucketsTable
	sh.tables = append(sh.tables, sh.sm.init(seed)) // at momentsTable
	for _, t := range sh.tables {
		sh.counts = append(sh.counts, t.counts())
	}
}

// bucketsTable is the index in shard.tables of the table of sliding
// windows with more than one bucket: the one after the algorithms'.
var bucketsTable = len(sluice.Algorithms())

// momentsTable is the index in shard.tables of the table of sliding
// windows with moments: the one after bucketsTable.
var momentsTable = bucketsTable + 1

// tableOf returns the index in shard.tables of lim's table: its
// algorithm's, bucketsTable for a sliding window with buckets, or
// momentsTable for one with moments. lim's algorithm must have a table.
func tableOf(lim *sluice.Limit) int {
	if lim.Moments > 0 && lim.Algorithm == sluice.SlidingWindow {
		return momentsTable
	}
	if lim.Buckets > 1 && lim.Algorithm == sluice.SlidingWindow {
		return bucketsTable
	}
	return int(lim.Algorithm)
}

// shareOf returns ⌈total/n⌉ for positive total and n, without the overflow
// of (total+n−1)/n near the top of int's range.
func shareOf[T int | int64](total, n T) T {
	q := total / n
	if total%n != 0 {
		q++
	}
	return q
}

// now returns the current instant in Unix nanoseconds: the coarse clock's
// reading if the store has one running, else the exact one.
func (s *Store) now() int64 {
	if t := s.coarse.ns.Load(); t != 0 {
		return t
	}
	return s.exactNow()
}

// exactNow returns the current instant in Unix nanoseconds from Clock or
// the monotonic clock (through the CPU's counter where the store has a
// tscClock).
func (s *Store) exactNow() int64 {
	if c := s.tsc; c != nil { // only where Clock is nil
		return c.at(rdtsc())
	}
	if s.clock != nil {
		return s.clock.Now().UnixNano()
	}
	return s.monoNow()
}

// monoNow returns the current instant in Unix nanoseconds from the
// monotonic clock: the wall clock read at New, plus the monotonic time
// since. A step of the wall clock after New moves no reading.
func (s *Store) monoNow() int64 { return s.baseNS + int64(time.Since(s.base)) }

// timeStandsStill reports whether two reads of the wall clock in a row
// return the same instant: inside a testing/synctest bubble, whose fake
// clock moves only when every goroutine in it waits. A store made there
// reads time.Since, which follows the bubble's clock, not the CPU's
// counter, which would not. (Where the counter is used at all, the kernel
// keeps time with it at nanosecond resolution, so real reads differ.)
func timeStandsStill() bool {
	a := time.Now()
	return time.Now().Equal(a)
}

// ClockResolution returns the coarse clock's resolution while its goroutine
// runs (Config.ClockResolution, raised to MinClockResolution), or 0 when
// decisions read the exact clock: without one, or after Close.
func (s *Store) ClockResolution() time.Duration {
	if s.coarse.ns.Load() == 0 {
		return 0
	}
	return s.resolution
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
	if lim.Algorithm.UsesBurst() {
		capacity = lim.Burst
	}
	if len(key) == 0 || len(key) > sluice.MaxKeyLen || cost < 1 || cost > capacity {
		return sluice.Result{}, sluice.Check(key, lim, cost)
	}
	now := s.now()
	h := maphash.String(s.seed, key)
	return s.shards[h>>s.shift].decide(now, h, key, lim, cost)
}

// use makes lim, which differs from the last limit the shard saw, its
// current one: it validates lim and prepares its derived values. The
// callers compare first (a limit seen last is valid), so that the common
// case stays inline on the hot path. sh.mu is held.
func (sh *shard) use(lim sluice.Limit) error {
	if err := lim.Validate(); err != nil {
		return err
	}
	if int(lim.Algorithm) >= bucketsTable {
		return errNoTable(lim.Algorithm)
	}
	sh.lim, sh.valid = lim, true
	sh.derived = sh.tables[tableOf(&lim)].prepare(lim)
	return nil
}

// sameLimit reports whether a and b are equal, as a == b does, comparing
// the fields that differ most often first and without the call to the
// compiler's equality function for the struct (about 30 instructions of a
// 500-instruction decision).
func sameLimit(a, b *sluice.Limit) bool {
	return a.Rate == b.Rate && a.Period == b.Period && a.Burst == b.Burst &&
		a.Algorithm == b.Algorithm && a.CountRejected == b.CountRejected &&
		a.Buckets == b.Buckets && a.Moments == b.Moments && a.Calendar == b.Calendar && a.Precision == b.Precision
}

// decide makes one decision under the shard's lock. The deferred unlock
// keeps a shard usable even if a decision ever panics and is recovered (as
// net/http recovers a handler).
func (sh *shard) decide(now int64, h uint64, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.valid || !sameLimit(&lim, &sh.lim) { // a limit seen last is valid
		if err := sh.use(lim); err != nil {
			return sluice.Result{}, err
		}
	}
	// The one switch on the algorithm: each case calls its state's methods
	// directly, as generic code would not (it calls them through a
	// dictionary, measurably slower on a held key: see BENCHMARKS.md,
	// section "Figures moved from code comments"), and the method that
	// does the work rather than TakePrepared, whose forwarding costs a few
	// instructions.
	switch lim.Algorithm {
	case sluice.TokenBucket:
		return lookup(sh, &sh.tb.table, now, h, key).TakeInterval(now, lim, sh.derived, cost), nil
	case sluice.FixedWindow:
		return lookup(sh, &sh.fw.table, now, h, key).Take(now, lim, cost), nil
	case sluice.SlidingWindow:
		if lim.Moments > 0 {
			st := sh.sm.get(h, key)
			if st == nil {
				st = sh.createMoments(now, h, key, lim)
			}
			before := st.Bytes()
			res := st.TakePrepared(now, lim, sh.derived, cost)
			if grown := st.Bytes() - before; grown != 0 {
				// A new key's buffer, or one laid out anew for another
				// k or d.
				sh.sm.heap += int64(grown)
				sh.trim(now, h)
			}
			return res, nil
		}
		if lim.Buckets > 1 {
			return lookup(sh, &sh.sb.table, now, h, key).TakePrepared(now, lim, sh.derived, cost), nil
		}
		st := sh.sw.get(h, key)
		if st == nil {
			st = sh.createCounter(now, h, key, lim)
		}
		return st.Take(now, lim, cost), nil
	case sluice.SlidingLog:
		st := lookup(sh, &sh.sl.table, now, h, key)
		before := st.Bytes()
		most := algorithm.MaxLogEntries(lim)
		// A ring short of what the limit needs and nearly full (an empty
		// one too): the log is held to its room (coarsening its slot
		// when the limit needs more entries than the room holds, even
		// while its entries would still fit).
		if n := st.Entries(); n*logEntryBytes >= before-before/8 && int64(before) < most*logEntryBytes {
			most = min(most, sh.logRoom(key))
		}
		res := st.TakeAtMost(now, lim, cost, most)
		if grown := st.Bytes() - before; grown != 0 {
			sh.sl.heap += int64(grown)
			sh.trim(now, h)
		}
		return res, nil
	case sluice.LeakyBucket:
		return lookup(sh, &sh.lb.table, now, h, key).TakeRate(now, lim, sh.derived, cost), nil
	default: // an algorithm sluice knows and this store does not
		return sluice.Result{}, errNoTable(lim.Algorithm)
	}
}

// Peek returns key's state under lim now without spending (see
// sluice.Peeker): it creates no key and refreshes no expiry. A key the
// store does not hold, never used or swept, peeks as fresh; one evicted
// peeks as the state it would come back with (see the package doc), and
// that only allocates (a sliding log's ring, a moments counter's buffer).
// The error is only for bad input.
func (s *Store) Peek(_ context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	if len(key) == 0 || len(key) > sluice.MaxKeyLen {
		return sluice.Result{}, sluice.CheckPeek(key, lim)
	}
	now := s.now()
	h := maphash.String(s.seed, key)
	sh := &s.shards[h>>s.shift]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.valid || !sameLimit(&lim, &sh.lim) { // a limit seen last is valid
		if err := sh.use(lim); err != nil {
			return sluice.Result{}, err
		}
	}
	t := tableOf(&lim)
	if t == int(sluice.SlidingWindow) && sh.sw.get(h, key) == nil {
		if i, ok := sh.sm.find(h, key); ok && sh.sm.slots[i].st.Expires() > now {
			// A key the moments table holds: as the first decision would
			// seed it (createCounter).
			var st algorithm.SlidingWindow
			st.Seed(now, lim, sh.sm.slots[i].st.Estimate(now, lim))
			return st.Peek(now, lim), nil
		}
	}
	if t != momentsTable || sh.sm.get(h, key) != nil {
		return sh.tables[t].peek(h, key, now, lim, sh.derived, &sh.mem), nil
	}
	if i, ok := sh.sw.find(h, key); ok {
		// A key the counter holds: as the first decision would seed it
		// (createMoments).
		var st algorithm.SlidingMoments
		st.Restore(now, lim, sh.sw.slots[i].st.Estimate(now, lim))
		return st.Peek(now, lim), nil
	}
	return sh.sm.peek(h, key, now, lim, sh.derived, &sh.mem), nil
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
	if int(lim.Algorithm) >= bucketsTable { // tables never change after New
		return errNoTable(lim.Algorithm)
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.tables[tableOf(&lim)].refund(h, key, now, lim, cost) {
		sh.trim(now, h)
	}
	return nil
}

// lookup returns key's state in t, inserting one if t has none: fresh, or
// rebuilt from what the shard's sketch remembers of keys evicted with its
// hash (at least as spent as the key was when evicted). A new key is
// cloned, so that the table never pins a caller's larger buffer, and first
// evicts other keys while the shard would be over either bound with it
// (its key bytes, and the slots t adds if it must grow). The pointer is
// valid while the shard's lock is held and nothing else is inserted or
// deleted. sh.lim and sh.derived are the decision's limit.
//
// Eviction work per new key is bounded by the key's bytes: each eviction
// samples afresh elsewhere in the tables, and once roomEvictions keys have
// gone without making room for t to grow, t gives up a key of its own
// instead of growing, after which each eviction frees at least 8 bytes (a
// 4 KB key among 8-byte keys: about 500 evictions at most). Memory moves
// between algorithms as the sweep empties and shrinks idle tables.
func lookup[S any, P expiring[S]](sh *shard, t *table[S], now int64, h uint64, key string) *S {
	if st := t.get(h, key); st != nil {
		return st
	}
	return create[S, P](sh, t, now, h, key)
}

// create is lookup's path for a key t does not hold.
func create[S any, P expiring[S]](sh *shard, t *table[S], now int64, h uint64, key string) *S {
	cost := t.keyGrowth(len(key))
	for i, at := 0, h; sh.n > 0 && (sh.n >= sh.maxKeys || sh.bytes()+t.growth()+cost > sh.maxBytes); i, at = i+1, nextProbe(at) {
		if i >= roomEvictions && t.growth() > 0 {
			if evictOne[S, P](sh, t, now, at) {
				continue
			}
		}
		if !sh.evict(now, at) {
			break
		}
	}
	sh.n++
	st := t.insert(h, key)
	if until, units, ok := sh.mem.recall(h, now, true); ok {
		t.restore(st, now, sh.lim, sh.derived, until, units)
		if t.heapOf != nil {
			t.heap += t.heapOf(st) // a sliding log's ring, a moments buffer; the next new key trims
		}
	}
	return st
}

// createMoments is the moments table's lookup path for a key it does not
// hold. A key the two-window counter holds (a rule reloaded from buckets 1
// to moments, as the config's default moved) leaves the counter's table
// and comes in with the units the counter counted now, pinned: they count
// whole until their sub-window leaves the period, so the key comes back no
// less spent than it was (algorithm.SlidingMoments.Restore).
func (sh *shard) createMoments(now int64, h uint64, key string, lim sluice.Limit) *algorithm.SlidingMoments {
	var units int64
	if i, ok := sh.sw.find(h, key); ok {
		units = sh.sw.slots[i].st.Estimate(now, lim)
		sh.sw.evictAt(i)
		sh.n--
	}
	st := create[algorithm.SlidingMoments](sh, &sh.sm.table, now, h, key)
	if units > 0 {
		before := st.Bytes()
		st.Restore(now, lim, units)
		sh.sm.heap += int64(st.Bytes() - before) // the buffer; the next new key trims, as after a restore
	}
	return st
}

// createCounter is the two-window counter's lookup path for a key it does
// not hold. A key the moments table holds (a rule reloaded from moments to
// buckets 1, opting out of the config's default) leaves that table and
// comes in with the units its sub-windows count now, the moments'
// estimate (algorithm.SlidingMoments.Estimate), in the current window
// (algorithm.SlidingWindow.Seed): whole until it ends, then fading over
// the next. Units of sub-windows already out of the period are not
// counted again.
func (sh *shard) createCounter(now int64, h uint64, key string, lim sluice.Limit) *algorithm.SlidingWindow {
	var until, units int64
	if i, ok := sh.sm.find(h, key); ok {
		st := &sh.sm.slots[i].st
		until, units = st.Expires(), st.Estimate(now, lim)
		sh.sm.evictAt(i) // its buffer leaves the table's heap
		sh.n--
	}
	st := create[algorithm.SlidingWindow](sh, &sh.sw.table, now, h, key)
	if units > 0 && until > now {
		st.Seed(now, lim, units)
	}
	return st
}

// roomEvictions is how many keys a new key may evict from any table before
// its own table stops growing to make room for it.
const roomEvictions = 64

// nextProbe returns where to sample for the next eviction after one at h:
// elsewhere, so that evicting many keys for one does not rescan the slots
// the last evictions emptied.
func nextProbe(h uint64) uint64 { return h*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019 }

// evictOne evicts the key of t closest to fresh among a sample taken at h
// (see drop), and reports whether t had one.
func evictOne[S any, P expiring[S]](sh *shard, t *table[S], now int64, h uint64) bool {
	i, e, ok := sample[S, P](t, h, evictionSample)
	if ok {
		sh.drop(t, i, e, now)
	}
	return ok
}

// evictable is what drop needs of a table: a *table[S] or a states.
type evictable interface {
	summaryAt(i uint64) (h uint64, until, units int64)
	evictAt(i uint64)
}

// drop evicts the key in slot i of t, whose state expires at exp: it
// remembers the key in the shard's sketch if its state is not fresh at
// now, and counts the eviction. Both of the shard's ways to evict (evict,
// evictOne) end here.
func (sh *shard) drop(t evictable, i uint64, exp, now int64) {
	if exp > now {
		kh, until, units := t.summaryAt(i)
		sh.mem.remember(kh, now, until, units)
	}
	t.evictAt(i)
	sh.n--
	sh.evictions++
}

// bytes returns the heap the shard's tables hold, and its sketch's share
// (counted from the start, allocated or not).
func (sh *shard) bytes() int64 {
	b := sh.mem.bytes()
	for _, c := range sh.counts {
		b += c.bytes()
	}
	return b
}

// logEntryBytes is the size of one entry of a sliding log's ring
// (algorithm.SlidingLog.Bytes).
const logEntryBytes = 16

// logRoom returns the most entries a sliding log on key may hold in this
// shard: the shard's share less what no eviction gives back (its sketch,
// its tables' slot arrays, the key's own bytes), in entries, and at least
// algorithm.LogEntries. A log that grows within it evicts other keys (trim);
// one whose ring is nearly full (seven eighths) is held to it, coarsening
// its slot rather than growing past it (see algorithm.SlidingLog.TakeAtMost),
// so that a shard's lone log stays within the shard's share. sh.mu is held.
func (sh *shard) logRoom(key string) int64 {
	fixed := sh.mem.bytes() + keyCost(len(key))
	for _, c := range sh.counts {
		fixed += int64(c.size) * c.slotBytes
	}
	return max((sh.maxBytes-fixed)/logEntryBytes, algorithm.LogEntries)
}

// trim evicts keys while the shard is over its byte budget, keeping at least
// one: a state that grew in place (a sliding log) may have pushed it over.
func (sh *shard) trim(now int64, h uint64) {
	for at := h; sh.n > 1 && sh.bytes() > sh.maxBytes; at = nextProbe(at) {
		if !sh.evict(now, at) {
			return
		}
	}
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

// Stats is a snapshot of a Store's size and of what it has dropped, for
// metrics. The zero Stats describes an empty store.
type Stats struct {
	// Keys is the number of keys held, idle ones included until the next
	// sweep.
	Keys int
	// Bytes is the heap the keys take, as MaxBytes counts it: key bytes,
	// table slots (spare ones included), sliding log entries, and the
	// sketch of evicted keys (SketchBytes, counted from the start). It
	// stays within MaxBytes, but for a shard whose one key is larger than
	// the shard's share (a key of sluice.MaxKeyLen bytes, or a sliding log
	// of 64 entries, in a share of a few kilobytes), and for a shard whose new key is a sliding log
	// rebuilt from the sketch: its ring (one entry of 16 bytes) may take
	// the shard past its share until the shard's next new key evicts.
	Bytes int64
	// SketchBytes is the part of Bytes that the sketch of evicted keys
	// takes (see the package doc): fixed when the store is made.
	SketchBytes int64
	// MaxKeys and MaxBytes are the bounds in force, defaults applied.
	MaxKeys  int
	MaxBytes int64
	// Evictions counts the keys evicted, since New, to stay within MaxKeys
	// or MaxBytes: keys that were not yet idle. A rate that keeps rising
	// means the bounds are too small for the traffic (or the traffic is a
	// flood of new keys).
	Evictions uint64
	// Swept counts the idle keys dropped by sweeps since New.
	Swept uint64
	// Remembered counts the evicted keys, since New, whose state was not
	// yet fresh and went to the sketch of evicted keys; Merged those of
	// them that found no free cell and merged into a wildcard, which every
	// key of its bucket then matches. A Merged that keeps rising means the
	// sketch is saturated: new keys in its saturated buckets start as spent
	// as the most spent of the keys merged there, until their reset.
	Remembered, Merged uint64
}

// Stats returns the store's current size and its cumulative evictions. It
// locks each shard in turn, so the figures are each shard's at a slightly
// different instant.
func (s *Store) Stats() Stats {
	st := Stats{MaxKeys: s.maxKeys, MaxBytes: s.maxBytes}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += sh.n
		st.Bytes += sh.bytes()
		st.Evictions += sh.evictions
		st.Swept += sh.swept
		st.SketchBytes += sh.mem.bytes()
		st.Remembered += sh.mem.remembered
		st.Merged += sh.mem.merged
		sh.mu.Unlock()
	}
	return st
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
		d := 0
		for _, t := range sh.tables {
			d += t.sweep(now)
		}
		sh.n -= d
		sh.swept += uint64(d)
		sh.mu.Unlock()
		dropped += d
	}
	return dropped
}

// evict drops one key to make room: of a sample of evictionSample keys per
// algorithm, taken from the slot the new key's hash h points at on, the one
// closest to fresh (the earliest to expire: a key already fresh at now
// first, which loses nothing). A key not yet fresh at now is remembered in
// the sketch. It reports whether it dropped one: false only when the shard
// is empty.
func (sh *shard) evict(now int64, h uint64) bool {
	var (
		best  int64
		which states
		at    uint64
	)
	for _, t := range sh.tables {
		if i, e, ok := t.sample(h); ok && (which == nil || e < best) {
			best, which, at = e, t, i
		}
	}
	if which == nil {
		return false
	}
	sh.drop(which, at, best, now)
	return true
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

// Close stops the janitor and the coarse clock's goroutine, and waits for
// them to exit. The store remains usable without them, reading the exact
// clock. Close is idempotent and always returns nil.
func (s *Store) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	if s.coarseDone != nil {
		<-s.coarseDone
	}
	return nil
}
