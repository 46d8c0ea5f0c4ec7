package page

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/sluicehq/sluice/internal/keyhash"
)

// shownSlots is the number of slots of a shownCache: a power of two, a few
// times the top list's default counters, so that the keys refused again
// and again (the ones the top list is about) keep their slot.
const shownSlots = 256

// shownCache remembers, for the keys refused lately, the top list's key of
// a refusal: its rule, a 0 byte and the key's keyed hash. A key refused
// again is then not hashed again: HMAC-SHA-256 costs more than the rest of
// a refusal's bookkeeping together.
//
// It never holds a key: a slot is found, and its entry recognised, by a
// 64-bit hash/maphash sum of the rule and the key under a random seed of
// the page, and by the key's length. Two keys of one rule and length meet
// at one sum with odds of about 2^-64 a pair, and the seed is nobody's to
// choose. Its memory is bounded: shownSlots entries, each a rule name
// (from the config, not from a request) and a fixed-length hash.
//
// Slots are read and replaced atomically, each entry immutable: Observe
// takes no lock for it, and a lost race costs one more hash, never a
// wrong one.
type shownCache struct {
	seed  maphash.Seed
	slots [shownSlots]atomic.Pointer[shownEntry]
}

// shownEntry is one slot's entry.
type shownEntry struct {
	sum    uint64
	keyLen int
	rule   string
	top    string // rule + "\x00" + the key's hash
}

// top returns the top list's key of a refusal of key under rule, hashing
// key with keys only when no entry of the cache is for it.
func (c *shownCache) top(rule, key string, keys *keyhash.Hasher) string {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(rule)
	h.WriteByte(0)
	h.WriteString(key)
	sum := h.Sum64()
	slot := &c.slots[sum%shownSlots]
	if e := slot.Load(); e != nil && e.sum == sum && e.keyLen == len(key) && e.rule == rule {
		return e.top
	}
	var buf [128]byte
	b := append(append(buf[:0], rule...), 0)
	e := &shownEntry{sum: sum, keyLen: len(key), rule: rule, top: string(keys.Append(b, key))}
	slot.Store(e)
	return e.top
}
