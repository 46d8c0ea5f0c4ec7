package memstore

import "hash/maphash"

// table is an open-addressing hash table from string keys to states of type
// S, built for the store's one access pattern: find a key by a hash the
// caller has already computed (the same hash picks the shard), and update its
// state in place.
//
// Why not a Go map: a map hashes the key again, cannot hand out a pointer to
// a value (so a value map costs a second lookup to write the state back, and
// a pointer map a heap object per key), and never gives memory back after
// deletions. Measured on the token bucket path, a pointer map cost 50 ns and
// 69 bytes per key, a value map 62 ns and 61 bytes; see BENCHMARKS.md for
// this table's figures.
//
// Layout: linear probing over two parallel arrays, a byte of tag per slot (0
// for empty, otherwise 0x80 | 7 bits of the hash) and the slots themselves,
// so a probe scans contiguous tag bytes and compares a key only on a tag
// match (1 in 128 false matches). The table doubles when it would pass 13/16
// full and halves when a sweep leaves it under 1/8 full. Deletion shifts the
// following entries back (no tombstones), so probe chains never rot.
type table[S any] struct {
	tags  []uint8
	slots []slot[S]
	mask  uint64
	n     int
	seed  maphash.Seed
}

type slot[S any] struct {
	key string
	st  S
}

const minTableSize = 8

func newTable[S any](seed maphash.Seed) table[S] {
	return table[S]{
		tags:  make([]uint8, minTableSize),
		slots: make([]slot[S], minTableSize),
		mask:  minTableSize - 1,
		seed:  seed,
	}
}

func tagOf(h uint64) uint8 { return uint8(h>>32) | 0x80 }

// get returns the state of key, whose hash is h, or nil.
func (t *table[S]) get(h uint64, key string) *S {
	tag := tagOf(h)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		switch t.tags[i] {
		case 0:
			return nil
		case tag:
			if t.slots[i].key == key {
				return &t.slots[i].st
			}
		}
	}
}

// insert adds key, which must be absent, with a zero state and returns the
// state. The pointer is valid until the next insert or delete.
func (t *table[S]) insert(h uint64, key string) *S {
	if (t.n+1)*16 > len(t.tags)*13 {
		t.resize(2 * len(t.tags))
	}
	i := h & t.mask
	for t.tags[i] != 0 {
		i = (i + 1) & t.mask
	}
	t.tags[i] = tagOf(h)
	t.slots[i].key = key
	t.n++
	return &t.slots[i].st
}

// home returns the slot index key's hash points at.
func (t *table[S]) home(key string) uint64 {
	return maphash.String(t.seed, key) & t.mask
}

// deleteAt empties slot i and shifts back the entries after it that would
// otherwise no longer be found.
func (t *table[S]) deleteAt(i uint64) {
	j := i
	for {
		j = (j + 1) & t.mask
		if t.tags[j] == 0 {
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
		t.tags[i], t.slots[i] = t.tags[j], t.slots[j]
		i = j
	}
	t.tags[i] = 0
	t.slots[i] = slot[S]{}
	t.n--
}

// resize rehashes every entry into a table of size slots (a power of two).
func (t *table[S]) resize(size int) {
	tags, slots := t.tags, t.slots
	t.tags = make([]uint8, size)
	t.slots = make([]slot[S], size)
	t.mask = uint64(size - 1)
	for i, g := range tags {
		if g == 0 {
			continue
		}
		h := maphash.String(t.seed, slots[i].key)
		j := h & t.mask
		for t.tags[j] != 0 {
			j = (j + 1) & t.mask
		}
		t.tags[j], t.slots[j] = g, slots[i]
	}
}

// shrink halves the table while it is under 1/8 full.
func (t *table[S]) shrink() {
	size := len(t.tags)
	for size > minTableSize && t.n*8 < size {
		size /= 2
	}
	if size != len(t.tags) {
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
	for i := 0; i < len(t.tags); {
		if t.tags[i] != 0 && P(&t.slots[i].st).Expires() <= now {
			t.deleteAt(uint64(i))
			d++
			continue // an entry may have shifted into slot i
		}
		i++
	}
	t.shrink()
	return d
}

// sample looks at up to n entries from slot start on and returns the index
// and expiry of the one that becomes fresh first.
func sample[S any, P expiring[S]](t *table[S], start uint64, n int) (idx uint64, exp int64, ok bool) {
	if t.n == 0 {
		return 0, 0, false
	}
	seen := 0
	for i, c := start&t.mask, 0; c < len(t.tags) && seen < n; i, c = (i+1)&t.mask, c+1 {
		if t.tags[i] == 0 {
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
