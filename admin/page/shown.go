package page

import (
	"hash/maphash"
	"sync/atomic"
)

// shownSlots is the number of slots of a shownCache: a power of two, in
// sets of two, a few times the top list's default counters, so that the
// keys refused again and again (the ones the top list is about) keep their
// slot.
const shownSlots = 256

// shownCache remembers, for the keys listed lately, the top list's key of
// a refusal: its rule, a 0 byte and the key's keyed hash. A key refused
// again is then not hashed again: HMAC-SHA-256 costs more than the rest of
// a refusal's bookkeeping together. Only keys the doorkeeper let in (a
// second refusal) are hashed and enter it, so a flood of keys refused once
// each does not push the listed keys' hashes out.
//
// It never holds a key: a set of two slots is found, and an entry
// recognised, by a 64-bit hash/maphash sum of the rule and the key under a
// random seed of the page, and by the key's length. Two keys of one rule and length meet
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

// sum returns the cache's (and the doorkeeper's) seeded sum of rule and
// key.
func (c *shownCache) sum(rule, key string) uint64 {
	var h maphash.Hash
	h.SetSeed(c.seed)
	h.WriteString(rule)
	h.WriteByte(0)
	h.WriteString(key)
	return h.Sum64()
}

// lookup returns the top list's key of a refusal of key under rule whose
// sum is sum, if the cache holds it: in one of the two slots of its set.
func (c *shownCache) lookup(sum uint64, rule, key string) (string, bool) {
	base := sum % shownSlots &^ 1
	for i := range uint64(2) {
		if e := c.slots[base+i].Load(); e != nil && e.sum == sum && e.keyLen == len(key) && e.rule == rule {
			return e.top, true
		}
	}
	return "", false
}

// store hashes key (hash: the page's keyed hash), keeps the top list's key
// of a refusal of key under rule in a slot of the set of sum (an empty
// one, else the one its sum chooses), and returns it.
func (c *shownCache) store(sum uint64, rule, key string, hash func(dst []byte, key string) []byte) string {
	var buf [128]byte
	b := append(append(buf[:0], rule...), 0)
	e := &shownEntry{sum: sum, keyLen: len(key), rule: rule, top: string(hash(b, key))}
	base := sum % shownSlots &^ 1
	slot := &c.slots[base+sum>>63]
	if c.slots[base].Load() == nil {
		slot = &c.slots[base]
	} else if c.slots[base+1].Load() == nil {
		slot = &c.slots[base+1]
	}
	slot.Store(e)
	return e.top
}
