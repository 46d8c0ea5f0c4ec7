package httplimit_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/rlheader"
)

// RateLimit reports the policy with the fewest units left, not the one
// with the smallest fraction of its quota left: a client that trusts r
// must not be able to send more than another policy admits.
func TestRateLimitReportsFewestRemaining(t *testing.T) {
	clock := clocktest.At(minute0)
	store := newStore(t, clock)
	small := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Minute}
	big := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1000, Period: time.Hour}
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: store, Headers: rlheader.Both},
		Policies: []httplimit.Policy{
			{Name: "small", Limit: small, Key: httplimit.Header("X-Api-Key")},
			{Name: "big", Limit: big, Key: httplimit.Header("X-Api-Key")},
		},
	})
	// big has 101 of 1000 left (10%); small has all 10 (100%).
	if _, err := store.AllowN(context.Background(), "big:k1", big, 899); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Api-Key", "k1")
	w := do(m.Handler(http.HandlerFunc(ok)), r)
	// Now small has 9 left (90%), big 100 (10%): small is closer to
	// exhaustion, since 9 more requests exhaust it.
	if got, want := w.Header().Get("RateLimit"), `"small";r=9;t=60`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if l, rem := w.Header().Get("X-RateLimit-Limit"), w.Header().Get("X-RateLimit-Remaining"); l != "10" || rem != "9" {
		t.Errorf("X-RateLimit-Limit %q, -Remaining %q, want 10 and 9", l, rem)
	}
}
