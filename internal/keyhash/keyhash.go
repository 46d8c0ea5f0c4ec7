// Package keyhash is how Sluice shows a key to people without showing it:
// the first 128 bits of HMAC-SHA-256 of the key under a secret, in hex,
// after a "~" (so that it is not mistaken for a store key's plain "#" hash,
// sluice.HashKey). It is the one keyed hash of keys of the log lines
// (httplimit) and of the admin listener's live page (admin/page).
//
// A plain hash would be no secret for keys from a small space, such as the
// 2^32 IPv4 addresses, which anyone can hash one by one and look up. Under
// a secret that never leaves the process (or the operator's replicas, when
// they share one), a hash tells one key from another and nothing more.
package keyhash

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
)

// Mark is what comes before a key's hash.
const Mark = '~'

// Len is the length of what Append adds: Mark and 32 hex digits.
const Len = 1 + 2*16

// processSecret is the secret of Hashers made without one: 32 random bytes
// drawn once per process.
var processSecret = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return b
})

// Hasher hashes keys under one secret. It is safe for concurrent use; make
// one with New. Its zero value is not usable.
type Hasher struct {
	ipad, opad [sha256.BlockSize]byte // the secret's HMAC pads
}

// New returns the Hasher of secret; an empty secret is the process's own,
// 32 random bytes drawn at its first use, shared by every Hasher made
// without one, so that hashes differ from one process to the next.
func New(secret []byte) *Hasher {
	if len(secret) == 0 {
		secret = processSecret()
	}
	var k [sha256.BlockSize]byte
	if len(secret) > sha256.BlockSize {
		sum := sha256.Sum256(secret)
		copy(k[:], sum[:])
	} else {
		copy(k[:], secret)
	}
	h := &Hasher{}
	for i, b := range k {
		h.ipad[i], h.opad[i] = b^0x36, b^0x5c
	}
	return h
}

// stackKey is the longest key Append hashes without allocating.
const stackKey = 512

// Append appends Mark and the hash of key to dst and returns it: equal keys
// give equal results under one secret. It allocates only when dst is too
// short or key is over 512 bytes. The hash is HMAC-SHA-256 (RFC 2104),
// written out over sha256.Sum256 so that nothing escapes to the heap.
func (h *Hasher) Append(dst []byte, key string) []byte {
	var buf [sha256.BlockSize + stackKey]byte
	in := buf[:0]
	if len(key) > stackKey {
		in = make([]byte, 0, sha256.BlockSize+len(key))
	}
	in = append(append(in, h.ipad[:]...), key...)
	inner := sha256.Sum256(in)
	var outer [sha256.BlockSize + sha256.Size]byte
	copy(outer[:], h.opad[:])
	copy(outer[sha256.BlockSize:], inner[:])
	sum := sha256.Sum256(outer[:])
	dst = append(dst, Mark)
	return hex.AppendEncode(dst, sum[:16])
}

// Hash returns prefix followed by Append's hash of key.
func (h *Hasher) Hash(prefix, key string) string {
	b := make([]byte, 0, len(prefix)+Len)
	b = append(b, prefix...)
	return string(h.Append(b, key))
}
