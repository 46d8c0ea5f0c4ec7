package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
)

// hotPath is the middleware's hot path as BenchmarkServe and
// TestServeAllocationsStayWithinBudget measure it on the memory store: two
// rate policies and an in-flight policy that admit a request, and a rate
// policy that refuses it (the 429 path), each with the status it answers
// and the allocations per request the guard allows (today's counts).
var hotPath = []struct {
	name   string
	cfg    httplimit.Config
	status int
	budget float64
}{
	{"admitted", httplimit.Config{
		Policies: []httplimit.Policy{
			{Name: "per-host", Key: httplimit.Host(), Limit: sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}},
			{Name: "per-method", Key: httplimit.Method(), Limit: sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}},
		},
		Concurrency: []httplimit.ConcurrencyPolicy{{Name: "conns", Max: 1 << 20, Key: httplimit.Host()}},
	}, http.StatusOK, 6},
	{"refused", httplimit.Config{
		Policies: []httplimit.Policy{
			{Name: "none", Key: httplimit.Host(), Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Hour}},
		},
	}, http.StatusTooManyRequests, 22}, // 21 when the wait, formatted per request past 300 s, is under 100 s
}

// measured returns the middleware of cfg (on a memory store of its own
// unless cfg has a Limiter) around next, and the request the hot-path
// measures send it again and again.
func measured(tb testing.TB, cfg httplimit.Config, next http.Handler) (http.Handler, *http.Request) {
	tb.Helper()
	if cfg.Limiter == nil {
		cfg.Limiter = newStore(tb, nil)
	}
	return mustNew(tb, cfg).Handler(next), httptest.NewRequest(http.MethodGet, "http://example.com/x", nil)
}

// BenchmarkServe measures one request through the middleware on each of
// hotPath's paths. Its allocs/op guard the hot path.
func BenchmarkServe(b *testing.B) {
	for _, bc := range hotPath {
		b.Run(bc.name, func(b *testing.B) {
			h, r := measured(b, bc.cfg, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			w := &statusWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		})
	}
}
