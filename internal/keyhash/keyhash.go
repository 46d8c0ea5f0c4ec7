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
//
// Shipped: built into the sluice binary through the packages that import
// it; it imports no test-only package (internal/archtest holds that).
package keyhash

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
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
	macs sync.Pool // of *state
}

// state is one HMAC-SHA-256 under the secret (crypto/hmac, which keeps
// the keyed pads' hash states and restores them on Reset), with the
// buffers its Write and Sum use: pooled, so that hashing a key allocates
// nothing once the pool is warm.
type state struct {
	mac hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

// New returns the Hasher of secret; an empty secret is the process's own,
// 32 random bytes drawn at its first use, shared by every Hasher made
// without one, so that hashes differ from one process to the next. It
// keeps a copy of secret.
func New(secret []byte) *Hasher {
	if len(secret) == 0 {
		secret = processSecret()
	}
	secret = append([]byte(nil), secret...)
	h := &Hasher{}
	h.macs.New = func() any { return &state{mac: hmac.New(sha256.New, secret)} }
	return h
}

// maxKept is the longest input buffer a pooled state keeps.
const maxKept = 4 << 10

// Append appends Mark and the hash of key to dst and returns it: equal keys
// give equal results under one secret. It allocates only when dst is too
// short (or the pool is cold).
func (h *Hasher) Append(dst []byte, key string) []byte {
	st := h.macs.Get().(*state)
	st.in = append(st.in[:0], key...)
	st.mac.Reset()
	st.mac.Write(st.in)
	sum := st.mac.Sum(st.sum[:0])
	dst = append(dst, Mark)
	dst = hex.AppendEncode(dst, sum[:16])
	if cap(st.in) > maxKept {
		st.in = nil
	}
	h.macs.Put(st)
	return dst
}

// Hash returns prefix followed by Append's hash of key.
func (h *Hasher) Hash(prefix, key string) string {
	b := make([]byte, 0, len(prefix)+Len)
	b = append(b, prefix...)
	return string(h.Append(b, key))
}
