package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
)

// adaptiveHandler is an empty handler behind one AdaptivePolicy whose
// limit admits every request (admit) or none beyond the one held.
func adaptiveHandler(tb testing.TB) http.Handler {
	tb.Helper()
	lim, err := adaptive.New(adaptive.Config{Initial: 1 << 20, Max: 1 << 20})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{
		Adaptive: []httplimit.AdaptivePolicy{{Name: "backend", Limiter: lim, Priority: httplimit.PriorityFromHeader("Sluice-Priority", adaptive.Default)}},
		Settings: httplimit.Settings{Logger: quiet},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
}

// BenchmarkAdaptivePolicy measures one admitted request through an
// AdaptivePolicy (priority from a header, the limiter's Acquire and Done,
// the status recorded) against the same handler bare.
func BenchmarkAdaptivePolicy(b *testing.B) {
	bare := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for _, bc := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"adaptive", adaptiveHandler(b)}} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "http://example.com/x", nil)
			r.Header.Set("Sluice-Priority", "critical")
			w := &statusWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				bc.h.ServeHTTP(w, r)
			}
		})
	}
}

// An admitted request through an AdaptivePolicy allocates nothing: the
// status recorder is pooled, the tokens live on the stack.
func TestAdaptivePolicyDoesNotAllocate(t *testing.T) {
	h := adaptiveHandler(t)
	r := httptest.NewRequest(http.MethodGet, "http://example.com/x", nil)
	r.Header.Set("Sluice-Priority", "sheddable")
	w := &statusWriter{h: http.Header{}}
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, r) }); n != 0 {
		t.Errorf("%v allocations per admitted request, want 0", n)
	}
}
