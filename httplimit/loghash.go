package httplimit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"sync"
)

// processLogKeySecret is the secret of the keyed hash that log lines show of
// keys when Config.LogKeySecret is empty: 32 random bytes drawn once per
// process.
var processLogKeySecret = sync.OnceValue(func() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return b
})

// logHash is how a log line shows key (a policy's final key): policy, ":~"
// and the first 128 bits of HMAC-SHA-256(secret, key) in hex. A plain hash
// would be no secret for keys from a small space, such as the 2^32 IPv4
// addresses, which anyone can hash one by one and look up; under a secret
// that never leaves the process (or the operator's replicas), the log tells
// one key from another and nothing more. "~" keeps it apart from a store
// key's "#" hash (sluice.HashKey), which it is not.
func logHash(macs *sync.Pool, policy, key string) string {
	mac := macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write([]byte(key))
	var sum [sha256.Size]byte
	b := make([]byte, 0, len(policy)+2+32)
	b = append(b, policy...)
	b = append(b, ':', '~')
	b = hex.AppendEncode(b, mac.Sum(sum[:0])[:16])
	macs.Put(mac)
	return string(b)
}

// logMACs returns a pool of HMAC-SHA-256 under secret for logHash, so that
// a refusal's log line does not make one.
func logMACs(secret []byte) *sync.Pool {
	return &sync.Pool{New: func() any { return hmac.New(sha256.New, secret) }}
}
