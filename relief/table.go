package relief

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// cacheKey is what a table's entry is for: a key under one limit.
type cacheKey struct {
	key string
	lim sluice.Limit
}

// table is the per-key state of an OverLimitCache or a Batcher, in 64 shards
// of at most max entries each, and the clock its entries are timed by.
type table[V any] struct {
	clock  sluice.Clock
	seed   maphash.Seed
	max    int // entries per shard
	shards [64]shard[V]
}

// shard is one lock's share of a table.
type shard[V any] struct {
	mu sync.Mutex
	m  map[cacheKey]V
}

// init readies t to hold maxKeys keys in all (0 means 100,000) on clock.
func (t *table[V]) init(clock sluice.Clock, maxKeys int) {
	if maxKeys <= 0 {
		maxKeys = 100_000
	}
	t.clock, t.seed, t.max = clock, maphash.MakeSeed(), max(maxKeys/len(t.shards), 1)
	for i := range t.shards {
		t.shards[i].m = make(map[cacheKey]V)
	}
}

// now is the table's clock in Unix ns.
func (t *table[V]) now() int64 {
	if t.clock != nil {
		return t.clock.Now().UnixNano()
	}
	return time.Now().UnixNano()
}

// shard returns key's shard.
func (t *table[V]) shard(key string) *shard[V] {
	return &t.shards[maphash.String(t.seed, key)%uint64(len(t.shards))]
}

// room reports whether sh can take one more entry, after dropping the
// entries whose until has passed if it is full. sh.mu is held.
func (t *table[V]) room(sh *shard[V], now int64, until func(V) int64) bool {
	if len(sh.m) < t.max {
		return true
	}
	for k, v := range sh.m {
		if until(v) <= now {
			delete(sh.m, k)
		}
	}
	return len(sh.m) < t.max
}
