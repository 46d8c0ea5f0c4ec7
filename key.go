package sluice

import (
	"crypto/sha256"
	"encoding/hex"
)

// HashedKeyLen is the length of the hash part of HashKey's result: "#" and
// 32 hex digits.
const HashedKeyLen = 1 + 2*16

// HashKey returns prefix, "#" and the first 128 bits of key's SHA-256 in
// hex: the one way the faces turn a key into a hash, to keep it out of the
// store and the logs or to bring one longer than MaxKeyLen within it. The
// "#" marks a hash, so that a caller whose raw keys cannot hold "#" where
// the hash begins keeps hashed and raw keys apart. The result is
// len(prefix)+HashedKeyLen bytes long; equal keys give equal results, and
// distinct keys collide with the odds of a 128-bit hash.
func HashKey(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	b := make([]byte, 0, len(prefix)+HashedKeyLen)
	b = append(b, prefix...)
	b = append(b, '#')
	b = hex.AppendEncode(b, sum[:16])
	return string(b)
}
