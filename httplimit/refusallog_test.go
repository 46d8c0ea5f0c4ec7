package httplimit_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memstore"
)

// With RefusalLogEvery, a flood of refusals is at most one line per
// interval: the first refusal of an interval is logged as before, and the
// next line says how many were not logged since the last. 1,000 refusals
// over 5 s, with RefusalLogEvery 1s, are 5 lines, and their counts add up
// to the refusals; before, they were 1,000 lines.
func TestRefusalLogEveryBoundsAFloodOfRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Config{SweepInterval: -1})
		defer store.Close()
		var logs testlog.Buffer
		m, err := httplimit.New(httplimit.Config{
			Settings: httplimit.Settings{Limiter: store, Logger: slog.New(slog.NewTextHandler(&logs, nil))},
			Policies: []httplimit.Policy{{Name: "k", Key: func(*http.Request) (string, bool) { return "one", true },
				Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Hour}}},
			RefusalLogEvery: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) // the one admitted
		refused := 0
		for i := range 1000 {
			if i > 0 && i%200 == 0 {
				time.Sleep(time.Second) // synctest's clock: no time passes
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code == http.StatusTooManyRequests {
				refused++
			}
		}
		if refused != 1000 {
			t.Fatalf("%d refused, want 1000", refused)
		}
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if len(lines) != 5 {
			t.Fatalf("%d lines for 1,000 refusals over 5 s, want 5:\n%s", len(lines), logs.String())
		}
		counted := len(lines)
		for _, l := range lines[1:] {
			_, v, ok := strings.Cut(l, "not_logged=")
			if !ok {
				t.Fatalf("a line after suppressed refusals lacks not_logged: %s", l)
			}
			var n int
			for _, c := range v {
				if c < '0' || c > '9' {
					break
				}
				n = 10*n + int(c-'0')
			}
			counted += n
		}
		if counted != 1000-199 { // the last interval's 199 are counted, not yet written
			t.Errorf("lines and their not_logged counts add up to %d, want %d:\n%s", counted, 1000-199, logs.String())
		}
	})
}

// failingStore is a limiter whose store is down.
type failingStore struct{}

func (failingStore) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	return sluice.Result{}, errors.New("connection refused")
}

// A failing limiter under a flood of requests is bounded as refusals are:
// with RefusalLogEvery, 200 requests over 2 s are 2 "limiter failed"
// lines, the second counting those not logged; before, 200 lines.
func TestRefusalLogEveryBoundsAFailingLimitersLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs testlog.Buffer
		m, err := httplimit.New(httplimit.Config{
			Settings: httplimit.Settings{Limiter: failingStore{}, StoreErrorStatus: http.StatusServiceUnavailable,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))},
			Policies:        []httplimit.Policy{{Name: "p", Limit: sluice.PerMinute(1), Key: httplimit.Global()}},
			RefusalLogEvery: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		for i := range 200 {
			if i == 100 {
				time.Sleep(time.Second) // synctest's clock: no time passes
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != http.StatusServiceUnavailable {
				t.Fatalf("a request with the store down: %d, want 503", w.Code)
			}
		}
		if n := strings.Count(logs.String(), "httplimit: limiter failed"); n != 2 || !strings.Contains(logs.String(), "not_logged=99") {
			t.Errorf("%d lines for 200 failures over 2 s, want 2, the second with not_logged=99:\n%s", n, logs.String())
		}
	})
}
