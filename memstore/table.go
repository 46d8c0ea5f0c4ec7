package memstore

import (
	"hash/maphash"
	"unsafe"

	"github.com/sluicehq/sluice"
)

// table is an open-addressing hash table from string keys to states of type
// S, built for the store's one access pattern: find a key by a hash the
// caller has already computed (the same hash picks the shard), and update its
// state in place.
//
// Why not a Go map: a map hashes the key again, cannot hand out a pointer to
// a value (so a value map costs a second lookup to write the state back, and
// a pointer map a heap object per key), and never gives memory back after
// deletions. Both map forms cost more time and bytes per key than this
// table on the token bucket path (the measurements: see BENCHMARKS.md,
// section "Figures moved from code comments").
//
// Layout: linear probing over one array of slots, each holding 32 bits of
// the key's hash (0 marks an empty slot), the key and the state, so that a
// probe reads one cache line and compares a key only when the hash bits
// match. Keeping the tag in the slot rather than in a side array of tag
// bytes saves a cache miss per decision on a table larger than the caches
// (see BENCHMARKS.md, section "Figures moved from code comments"). The
// slot index is the hash scaled onto the table's size by a multiplication,
// so the table can grow by half rather than double, which keeps it between
// 13/24 and 13/16 full and costs less memory than doubling would: it grows
// when it would pass 13/16 full and shrinks by a third while a sweep leaves
// it under 1/8 full.
// Deletion shifts the following entries back (no tombstones), so probe
// chains never rot.
//
// A table counts the bytes it holds for the store's budget: its slot array,
// its keys, and the heap its states hold beyond their slots (a sliding log's
// buffer, a moments counter's), which the caller adds to heap when a state grows or shrinks and
// which heapOf reports when an entry is deleted.
type table[S any] struct {
	slots []slot[S]
	tableBytes
	n    int
	seed maphash.Seed

	// heapOf returns the heap bytes a state holds beyond its slot; nil for
	// states that hold none.
	heapOf func(*S) int64
	// summary and restore are the algorithm's evictionFuncs: what an
	// evicted state leaves in the shard's sketch, and a new state rebuilt
	// from it.
	summary func(*S) (until, units int64)
	restore func(st *S, now int64, lim sluice.Limit, prepared, until, units int64)
}

// tableBytes is the part of a table that says how many bytes it holds. It
// does not depend on the state type, so that a shard sums its tables' bytes
// (on every new key) by reading fields rather than calling each table
// through an interface.
type tableBytes struct {
	size      uint64 // len(slots)
	slotBytes int64  // unsafe.Sizeof(slot[S]{})
	keyBytes  int64  // Σ keyCost of the keys held
	heap      int64  // Σ heap bytes of the states held, beyond their slots
}

type slot[S any] struct {
	tag uint32 // 0: empty
	key string
	st  S
}

const minTableSize = 8

func newTable[S any](seed maphash.Seed) table[S] {
	return table[S]{
		slots:      make([]slot[S], minTableSize),
		tableBytes: tableBytes{size: minTableSize, slotBytes: int64(unsafe.Sizeof(slot[S]{}))},
		seed:       seed,
	}
}

// keyCost is what a cloned key of n bytes costs on the heap: its bytes
// rounded up to the allocator's 8-byte granularity. (Larger size classes
// round up further, by at most an eighth; the budget does not chase them.)
func keyCost(n int) int64 { return int64(n+7) &^ 7 }

// bytes returns the heap the table holds: its slots, its keys and its
// states' own heap.
func (b *tableBytes) bytes() int64 {
	return int64(b.size)*b.slotBytes + b.keyBytes + b.heap
}

// growth returns the bytes the next insert adds to the slot array by
// growing it, or 0 if it will not grow.
func (t *table[S]) growth() int64 {
	if (t.n+1)*16 > len(t.slots)*13 {
		return int64(len(t.slots)/2) * t.slotBytes
	}
	return 0
}

// tagOf returns the 32 bits of h kept in a slot, never 0. The top bits of h
// pick the shard and the low 32 the slot, so the tag mixes all 64 bits, lest
// keys of one shard, or of one neighbourhood of slots, share tag bits.
func tagOf(h uint64) uint32 { return uint32((h*0x9e3779b97f4a7c15)>>32) | 1 }

// index maps the low 32 bits of a hash onto [0, size) by multiplication
// (Lemire's fast range), so that the table may have any size.
func (t *table[S]) index(h uint64) uint64 { return (h & 0xffffffff) * t.size >> 32 }

// next returns the slot after i, wrapping around.
func (t *table[S]) next(i uint64) uint64 {
	if i++; i == t.size {
		return 0
	}
	return i
}

// get returns the state of key, whose hash is h, or nil.
func (t *table[S]) get(h uint64, key string) *S {
	tag := tagOf(h)
	for i := t.index(h); ; i = t.next(i) {
		sl := &t.slots[i]
		switch sl.tag {
		case 0:
			return nil
		case tag:
			if sl.key == key {
				return &sl.st
			}
		}
	}
}

// find returns the slot index of key, whose hash is h, if t holds it.
func (t *table[S]) find(h uint64, key string) (uint64, bool) {
	tag := tagOf(h)
	for i := t.index(h); ; i = t.next(i) {
		switch sl := &t.slots[i]; sl.tag {
		case 0:
			return 0, false
		case tag:
			if sl.key == key {
				return i, true
			}
		}
	}
}

// insert adds key, which must be absent, with a zero state and returns the
// state. The pointer is valid until the next insert or delete.
func (t *table[S]) insert(h uint64, key string) *S {
	if (t.n+1)*16 > len(t.slots)*13 {
		t.resize(len(t.slots) + len(t.slots)/2)
	}
	i := t.index(h)
	for t.slots[i].tag != 0 {
		i = t.next(i)
	}
	t.slots[i].tag = tagOf(h)
	t.slots[i].key = key
	t.keyBytes += keyCost(len(key))
	t.n++
	return &t.slots[i].st
}

// home returns the slot index key's hash points at.
func (t *table[S]) home(key string) uint64 {
	return t.index(maphash.String(t.seed, key))
}

// deleteAt empties slot i and shifts back the entries after it that would
// otherwise no longer be found.
func (t *table[S]) deleteAt(i uint64) {
	t.keyBytes -= keyCost(len(t.slots[i].key))
	if t.heapOf != nil {
		t.heap -= t.heapOf(&t.slots[i].st)
	}
	j := i
	for {
		j = t.next(j)
		if t.slots[j].tag == 0 {
			break
		}
		// The entry at j may move to the hole at i unless its home lies
		// cyclically in (i, j], in which case it is reachable already.
		k := t.home(t.slots[j].key)
		if i <= j {
			if i < k && k <= j {
				continue
			}
		} else if i < k || k <= j {
			continue
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = slot[S]{}
	t.n--
}

// evictAt deletes slot i, then shrinks the table if evictions have left it
// sparse, so that a table drained by evictions does not stay large.
func (t *table[S]) evictAt(i uint64) {
	t.deleteAt(i)
	t.shrink()
}

// resize rehashes every entry into a table of size slots.
func (t *table[S]) resize(size int) {
	slots := t.slots
	t.slots = make([]slot[S], size)
	t.size = uint64(size)
	for i := range slots {
		if slots[i].tag == 0 {
			continue
		}
		j := t.home(slots[i].key)
		for t.slots[j].tag != 0 {
			j = t.next(j)
		}
		t.slots[j] = slots[i]
	}
}

// shrink reduces the table by thirds while it is under 1/8 full.
func (t *table[S]) shrink() {
	size := len(t.slots)
	for size > minTableSize && t.n*8 < size {
		size = max(size*2/3, minTableSize)
	}
	if size != len(t.slots) {
		t.resize(size)
	}
}

// expiring is a pointer to a state that knows when it becomes fresh again.
type expiring[S any] interface {
	*S
	Expires() int64
}

// sweep deletes every entry whose state is fresh at now, shrinks the table if
// it has become sparse, and returns how many it deleted.
func sweep[S any, P expiring[S]](t *table[S], now int64) int {
	d := 0
	for i := 0; i < len(t.slots); {
		if t.slots[i].tag != 0 && P(&t.slots[i].st).Expires() <= now {
			t.deleteAt(uint64(i))
			d++
			continue // an entry may have shifted into slot i
		}
		i++
	}
	t.shrink()
	return d
}

// summaryAt returns the hash of the key in slot i and what its state
// leaves in the sketch if evicted (see evictionFuncs).
func (t *table[S]) summaryAt(i uint64) (h uint64, until, units int64) {
	until, units = t.summary(&t.slots[i].st)
	return maphash.String(t.seed, t.slots[i].key), until, units
}

// sampleProbe bounds the slots sample looks at once it has found an entry,
// so that eviction from a sparse table costs a few cache lines.
const sampleProbe = 64

// sample looks at up to n entries from slot start on, within sampleProbe
// slots unless it has found none yet, and returns the index and expiry of
// the one that becomes fresh first.
func sample[S any, P expiring[S]](t *table[S], start uint64, n int) (idx uint64, exp int64, ok bool) {
	if t.n == 0 {
		return 0, 0, false
	}
	seen := 0
	for i, c := start%t.size, 0; c < len(t.slots) && seen < n && (c < sampleProbe || !ok); i, c = t.next(i), c+1 {
		if t.slots[i].tag == 0 {
			continue
		}
		e := P(&t.slots[i].st).Expires()
		if !ok || e < exp {
			idx, exp, ok = i, e, true
		}
		seen++
	}
	return idx, exp, ok
}
