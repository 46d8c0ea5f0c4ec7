package sluice_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestHashKeyIsPrefixMarkAndHash(t *testing.T) {
	// The first 128 bits of SHA-256("abc").
	if got, want := sluice.HashKey("api:", "abc"), "api:#ba7816bf8f01cfea414140de5dae2223"; got != want {
		t.Errorf("HashKey = %q, want %q", got, want)
	}
	long := strings.Repeat("x", 3*sluice.MaxKeyLen)
	if a, b := sluice.HashKey("p", long), sluice.HashKey("p", long+"y"); a == b || len(a) != 1+sluice.HashedKeyLen {
		t.Errorf("HashKey of long keys: %q and %q", a, b)
	}
}
