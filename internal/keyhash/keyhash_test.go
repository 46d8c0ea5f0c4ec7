package keyhash

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// Equal keys under one secret hash alike; another secret or another key
// hashes otherwise; an empty secret is the process's own, the same for
// every Hasher made without one.
func TestHashIsKeyedBySecret(t *testing.T) {
	a, b := New([]byte("secret-one-of-sixteen")), New([]byte("secret-two-of-sixteen"))
	k := "per_ip:203.0.113.7"
	if a.Hash("", k) != New([]byte("secret-one-of-sixteen")).Hash("", k) {
		t.Error("one secret, two hashes")
	}
	if a.Hash("", k) == b.Hash("", k) || a.Hash("", k) == a.Hash("", k+"0") {
		t.Error("two secrets or two keys, one hash")
	}
	if New(nil).Hash("", k) != New([]byte{}).Hash("", k) {
		t.Error("two Hashers without a secret disagree")
	}
	h := a.Hash("p:", k)
	if len(h) != 2+Len || !strings.HasPrefix(h, "p:~") || strings.Contains(h, sluice.HashKey("", k)[1:]) {
		t.Errorf("%q, want p:~ and 32 hex digits, not the plain hash", h)
	}
}

// The hash is HMAC-SHA-256 under the secret, as crypto/hmac computes it,
// for secrets shorter and longer than a block, and keys past the stack
// buffer.
func TestHashIsHMACSHA256(t *testing.T) {
	for _, secret := range [][]byte{[]byte("sixteen-byte-key"), []byte(strings.Repeat("s", 100))} {
		for _, key := range []string{"", "per_ip:203.0.113.7", strings.Repeat("k", 2000)} {
			mac := hmac.New(sha256.New, secret)
			mac.Write([]byte(key))
			want := "~" + hex.EncodeToString(mac.Sum(nil)[:16])
			if got := New(secret).Hash("", key); got != want {
				t.Errorf("secret of %d bytes, key of %d: %q, want %q", len(secret), len(key), got, want)
			}
		}
	}
}

// Append allocates nothing into a buffer long enough, once its pool is
// warm.
func TestAppendAllocatesNothing(t *testing.T) {
	if raceEnabled || testing.CoverMode() != "" {
		t.Skip("allocation counts vary under the race detector and with coverage")
	}
	h := New(nil)
	buf := make([]byte, 0, 64)
	h.Append(buf, "warm")
	if n := testing.AllocsPerRun(100, func() { h.Append(buf[:0], "per_ip:203.0.113.7") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func BenchmarkHash(b *testing.B) {
	h := New(nil)
	b.ReportAllocs()
	for b.Loop() {
		h.Hash("", "d|remote_address=203.0.113.7")
	}
}

// BenchmarkPlainHash is the plain hash the page showed before, for
// comparison.
func BenchmarkPlainHash(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sluice.HashKey("", "d|remote_address=203.0.113.7")
	}
}
