package relief

import (
	"hash/maphash"
	"strings"
	"sync"

	"github.com/sluicehq/sluice"
)

// cacheKey is what a table's entry is for: a key under one limit.
type cacheKey struct {
	key string
	lim sluice.Limit
}

// table is the per-key state of an OverLimitCache or a Batcher, in 64 shards
// of at most max entries and maxBytes bytes each, and the clock its entries
// are timed by.
type table[V any] struct {
	clock    sluice.Clock
	seed     maphash.Seed
	max      int   // entries per shard
	maxBytes int64 // bytes per shard, as entryCost counts them
	shards   [64]shard[V]
}

// shard is one lock's share of a table. bytes is the entryCost of its
// entries.
type shard[V any] struct {
	mu    sync.Mutex
	m     map[cacheKey]V
	bytes int64
}

// Defaults of the tables' bounds.
const (
	defaultMaxKeys  = 100_000
	defaultMaxBytes = 32 << 20
)

// entryOverhead is what an entry costs besides its key's bytes: its map
// slot (a cacheKey of 56 bytes and a value) with the map's spare room, and
// a Batcher's pool. An estimate on the generous side.
const entryOverhead = 128

// entryCost is the bytes an entry for key counts against maxBytes.
func entryCost(key string) int64 { return int64(len(key)+7)&^7 + entryOverhead }

// init readies t to hold maxKeys keys (0 means 100,000) and maxBytes bytes
// (0 means 32 MiB) in all, on clock.
func (t *table[V]) init(clock sluice.Clock, maxKeys int, maxBytes int64) {
	if maxKeys <= 0 {
		maxKeys = defaultMaxKeys
	}
	if maxBytes <= 0 {
		maxBytes = defaultMaxBytes
	}
	n := len(t.shards)
	t.clock, t.seed = sluice.ClockOr(clock), maphash.MakeSeed()
	t.max = max(maxKeys/n+min(maxKeys%n, 1), 1)
	t.maxBytes = max(maxBytes/int64(n)+min(maxBytes%int64(n), 1), 1)
	for i := range t.shards {
		t.shards[i].m = make(map[cacheKey]V)
	}
}

// now is the table's clock in Unix ns.
func (t *table[V]) now() int64 { return t.clock.Now().UnixNano() }

// shard returns key's shard: the one of its hash modulo the shards.
func (t *table[V]) shard(key string) *shard[V] {
	return &t.shards[t.hash(key)%uint64(len(t.shards))]
}

// hash is key's hash, which picks its shard.
func (t *table[V]) hash(key string) uint64 { return maphash.String(t.seed, key) }

// putSample bounds the entries a full shard looks at for expired ones
// before it declines a new entry.
const putSample = 64

// put sets ck's entry in sh to v, adding it if there is room for it after
// the expired entries among a sample are dropped, and reports whether ck
// now holds v. A new entry's key is cloned, so that the table never keeps a
// caller's larger buffer alive. sh.mu is held.
func (t *table[V]) put(sh *shard[V], ck cacheKey, v V, now int64, until func(V) int64) bool {
	if _, ok := sh.m[ck]; ok {
		sh.m[ck] = v
		return true
	}
	cost := entryCost(ck.key)
	if len(sh.m) >= t.max || sh.bytes+cost > t.maxBytes {
		// Drop the expired entries among a bounded sample (map iteration
		// starts at a random place), so that a full shard costs each new
		// entry bounded work; the expired ones go a sample at a time.
		seen := 0
		for k, old := range sh.m {
			if until(old) <= now {
				t.del(sh, k)
			}
			if seen++; seen == putSample {
				break
			}
		}
		if len(sh.m) >= t.max || sh.bytes+cost > t.maxBytes {
			return false
		}
	}
	ck.key = strings.Clone(ck.key)
	sh.m[ck] = v
	sh.bytes += cost
	return true
}

// del removes ck's entry from sh, if any. sh.mu is held.
func (t *table[V]) del(sh *shard[V], ck cacheKey) {
	if _, ok := sh.m[ck]; ok {
		delete(sh.m, ck)
		sh.bytes -= entryCost(ck.key)
	}
}
