package memstore

import (
	"encoding/binary"
	"hash/maphash"
	"strings"
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
// the key's hash (0 marks an empty slot), the key's length, the key itself
// if it has at most inlineKey (19) bytes, and the state, so that a probe
// reads one cache line and compares a key only when the hash bits match,
// within the slot: a key of up to 19 bytes is never a pointer to chase
// (see BENCHMARKS.md, section "The key in its slot") and costs no bytes
// beyond its slot. A longer key is held in an array of long keys beside the
// slots, at an index its slot holds (its bytes and a 16-byte string header;
// the array doubles as it grows and is counted whole), so that slots hold
// no pointer and a slot array of pointer-free states is not scanned by the
// garbage collector. Keeping the tag in the slot rather than in a side
// array of tag bytes saves a cache miss per decision on a table larger
// than the caches (see BENCHMARKS.md, section "Figures moved from code
// comments"). The slot index is the hash scaled onto the table's size by a
// multiplication, so the table can grow by half rather than double, which
// keeps it between 13/24 and 13/16 full and costs less memory than
// doubling would: it grows when it would pass 13/16 full and shrinks by a
// third while a sweep leaves it under 1/8 full. Deletion shifts the
// following entries back (no tombstones), so probe chains never rot.
//
// A table counts the bytes it holds for the store's budget: its slot
// array, its long keys and their array, and the heap its states hold
// beyond their slots (a sliding log's buffer, a moments counter's), which
// the caller adds to heap when a state grows or shrinks and which heapOf
// reports when an entry is deleted.
type table[S any] struct {
	slots []slot[S]
	// long holds the keys longer than inlineKey, each at the index its
	// slot names; deleting one moves the last into its place.
	long []string
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
	keyBytes  int64  // Σ keyCost of the keys held, and the long keys' spare entries
	heap      int64  // Σ heap bytes of the states held, beyond their slots
}

// slot is one entry of a table. A key of at most inlineKey bytes is held in
// the slot itself, so that comparing it reads the slot's cache line and no
// other; a longer key is held in the table's array of long keys, at the
// index the first four bytes of key hold. The slot holds no pointer, so
// that the slot array of a state without pointers is not scanned by the
// garbage collector.
type slot[S any] struct {
	tag uint32 // 0: empty
	// n is the key's length if it is held inline, longKey if it is held
	// in the table's long keys.
	n   uint8
	key [inlineKey]byte
	st  S
}

// inlineKey is the longest key a slot holds inline: the bytes left in 24
// after the tag and the length, so that a slot holds the key in what it
// spent on a string header and its padding before.
const inlineKey = 19

// longKey is slot.n for a key held in the table's long keys.
const longKey = 0xff

// longEntryBytes is what a long key's entry in the table's array of long
// keys costs: a string header.
const longEntryBytes = int64(unsafe.Sizeof(""))

// minLong is the capacity of a table's array of long keys when it first
// holds one, and the least it shrinks to.
const minLong = 8

const minTableSize = 8

func newTable[S any](seed maphash.Seed) table[S] {
	return table[S]{
		slots:      make([]slot[S], minTableSize),
		tableBytes: tableBytes{size: minTableSize, slotBytes: int64(unsafe.Sizeof(slot[S]{}))},
		seed:       seed,
	}
}

// keyCost is what a key of n bytes costs beyond its slot: nothing for a key
// the slot holds inline; for a longer one, its entry in the table's long
// keys and its bytes, cloned, rounded up to the allocator's 8-byte
// granularity. (Larger size classes round up further, by at most an
// eighth; the budget does not chase them.)
func keyCost(n int) int64 {
	if n <= inlineKey {
		return 0
	}
	return int64(n+7)&^7 + longEntryBytes
}

// keyGrowth returns the bytes inserting a key of n bytes adds beyond its
// slot: for a long key, its bytes, and the entries the long keys' array
// gains if the key must grow it (a spare entry is counted already).
func (t *table[S]) keyGrowth(n int) int64 {
	if n <= inlineKey {
		return 0
	}
	c := keyCost(n) - longEntryBytes
	if len(t.long) == cap(t.long) {
		c += int64(longCap(len(t.long)+1)-cap(t.long)) * longEntryBytes
	}
	return c
}

// longCap returns the capacity the array of long keys grows to, or shrinks
// to, when it must hold n keys: twice n, and at least minLong.
func longCap(n int) int { return max(2*n, minLong) }

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

// holds reports whether sl holds key.
func (t *table[S]) holds(sl *slot[S], key string) bool {
	if len(key) <= inlineKey {
		return int(sl.n) == len(key) && string(sl.key[:len(key)]) == key
	}
	return sl.n == longKey && t.long[longIndex(sl)] == key
}

// longIndex returns the index in the table's long keys of the key sl holds,
// which must be long.
func longIndex[S any](sl *slot[S]) uint32 { return binary.LittleEndian.Uint32(sl.key[:4]) }

// hashAt returns the hash of the key slot i holds.
func (t *table[S]) hashAt(i uint64) uint64 {
	sl := &t.slots[i]
	if sl.n == longKey {
		return maphash.String(t.seed, t.long[longIndex(sl)])
	}
	return maphash.Bytes(t.seed, sl.key[:sl.n])
}

// keyAt returns the key slot i holds, "" if it is empty.
func (t *table[S]) keyAt(i uint64) string {
	sl := &t.slots[i]
	if sl.n == longKey {
		return t.long[longIndex(sl)]
	}
	return string(sl.key[:sl.n])
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
			if t.holds(sl, key) {
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
			if t.holds(sl, key) {
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
	sl := &t.slots[i]
	sl.tag = tagOf(h)
	if len(key) <= inlineKey {
		sl.n = uint8(len(key))
		copy(sl.key[:], key)
	} else {
		t.keyBytes += t.keyGrowth(len(key))
		if len(t.long) == cap(t.long) {
			t.long = append(make([]string, 0, longCap(len(t.long)+1)), t.long...)
		}
		sl.n = longKey
		binary.LittleEndian.PutUint32(sl.key[:4], uint32(len(t.long)))
		t.long = append(t.long, strings.Clone(key)) // never pin the caller's buffer
	}
	t.n++
	return &sl.st
}

// dropLong removes the long key of slot i from the long keys: the last one
// takes its index (its slot is found by its hash and told), and the array
// shrinks by half once it is three quarters spare.
func (t *table[S]) dropLong(i uint64) {
	k := longIndex(&t.slots[i])
	t.keyBytes -= keyCost(len(t.long[k])) - longEntryBytes // its entry stays, spare
	last := uint32(len(t.long) - 1)
	if k != last {
		moved := t.long[last]
		j, _ := t.find(maphash.String(t.seed, moved), moved)
		binary.LittleEndian.PutUint32(t.slots[j].key[:4], k)
		t.long[k] = moved
	}
	t.long[last] = ""
	t.long = t.long[:last]
	if c := longCap(len(t.long)); c*2 <= cap(t.long) {
		t.keyBytes -= int64(cap(t.long)-c) * longEntryBytes
		t.long = append(make([]string, 0, c), t.long...)
	}
}

// deleteAt empties slot i and shifts back the entries after it that would
// otherwise no longer be found.
func (t *table[S]) deleteAt(i uint64) {
	if t.slots[i].n == longKey {
		t.dropLong(i)
	}
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
		k := t.index(t.hashAt(j))
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
	old := *t
	t.slots = make([]slot[S], size)
	t.size = uint64(size)
	slots := old.slots
	for i := range slots {
		if slots[i].tag == 0 {
			continue
		}
		j := t.index(old.hashAt(uint64(i)))
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
	return t.hashAt(i), until, units
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
