package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// A scoped key up to sluice.MaxKeyLen, the one bound on keys, reaches the
// store as it is; one byte longer, it is hashed (sluice.HashKey).
func TestKeyHashedOnlyBeyondMaxKeyLen(t *testing.T) {
	store := newStore(t, clocktest.At(minute0))
	lim := sluice.PerMinute(1)
	m := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: store}, Policies: []httplimit.Policy{{Name: "big", Limit: lim, Key: httplimit.Header("X-Big")}}})
	h := m.Handler(http.HandlerFunc(ok))
	send := func(key string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Big", key)
		if w := do(h, r); w.Code != 200 {
			t.Fatalf("a %d-byte key: %d, want 200", len(key), w.Code)
		}
	}
	fits := strings.Repeat("k", sluice.MaxKeyLen-len("big:"))
	send(fits)
	if res, err := store.Allow(context.Background(), "big:"+fits, lim); err != nil || res.Allowed {
		t.Errorf("a key of MaxKeyLen bytes did not reach the store as it is (%v, %v)", res, err)
	}
	over := fits + "k"
	send(over)
	if res, err := store.Allow(context.Background(), sluice.HashKey("big:", "big:"+over), lim); err != nil || res.Allowed {
		t.Errorf("a key over MaxKeyLen was not stored as its hash (%v, %v)", res, err)
	}
}
