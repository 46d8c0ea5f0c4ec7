package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkServe measures one request through the middleware with the
// memory store: two rate policies and an in-flight policy that admit it,
// and a rate policy that refuses it (the 429 path). Its allocs/op guard
// the hot path.
func BenchmarkServe(b *testing.B) {
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	for _, bc := range []struct {
		name string
		cfg  httplimit.Config
	}{
		{"admitted", httplimit.Config{
			Policies: []httplimit.Policy{
				{Name: "per-host", Key: httplimit.Host(), Limit: sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}},
				{Name: "per-method", Key: httplimit.Method(), Limit: sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}},
			},
			Concurrency: []httplimit.ConcurrencyPolicy{{Name: "conns", Max: 1 << 20, Key: httplimit.Host()}},
		}},
		{"refused", httplimit.Config{
			Policies: []httplimit.Policy{
				{Name: "none", Key: httplimit.Host(), Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Hour}},
			},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			st := memstore.New(memstore.Config{})
			defer st.Close()
			bc.cfg.Limiter, bc.cfg.Logger = st, quiet
			m, err := httplimit.New(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			h := m.Handler(ok)
			r := httptest.NewRequest(http.MethodGet, "http://example.com/x", nil)
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps only its header map.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
