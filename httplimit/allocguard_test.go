package httplimit_test

import (
	"net/http"
	"testing"
)

// TestServeAllocationsStayWithinBudget guards the middleware's hot path on
// the memory store: an allocation added to an admitted or a refused request
// fails it (testing.AllocsPerRun counts exactly, unlike a timing). The
// budgets, hotPath's, are today's counts. Admitted, two rate policies and an in-flight
// policy: each policy's store key (2), the in-flight group key and its
// release (2), and the two header values that depend on the request (2;
// RateLimit-Policy's is made once). Refused: the 429's body and the log
// line's hashed key add the rest (RateLimit's and Retry-After's values
// and the reason's are made once per policy and wait, and shared).
func TestServeAllocationsStayWithinBudget(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random; make test runs this without -race")
	}
	if testing.CoverMode() != "" {
		t.Skip("coverage counters allocate")
	}
	for _, c := range hotPath {
		t.Run(c.name, func(t *testing.T) {
			h, r := measured(t, c.cfg, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			rec := &statusWriter{h: http.Header{}}
			h.ServeHTTP(rec, r)
			h.ServeHTTP(rec, r) // the refused case's first request is admitted
			if rec.status == 0 {
				rec.status = http.StatusOK // nothing written: net/http sends 200
			}
			if rec.status != c.status {
				t.Fatalf("status %d, want %d", rec.status, c.status)
			}
			n := testing.AllocsPerRun(200, func() {
				clear(rec.h)
				h.ServeHTTP(rec, r)
			})
			t.Logf("%.1f allocations per request", n)
			if n > c.budget {
				t.Errorf("%.1f allocations per %s request, at most %v before", n, c.name, c.budget)
			}
		})
	}
}

// statusWriter is a ResponseWriter that keeps its header map and the last
// status written (200 when the handler writes none).
type statusWriter struct {
	h      http.Header
	status int
}

func (w *statusWriter) Header() http.Header { return w.h }
func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}
func (w *statusWriter) WriteHeader(code int) { w.status = code }
