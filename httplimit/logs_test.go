package httplimit_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// A refusal's log line carries the key's hash, never a key taken from a
// header (an API key), unless LogKeys; RefusalLevel moves it out of the
// info level for a program that logs refusals elsewhere.
func TestRefusalLogHidesTheKey(t *testing.T) {
	for _, tc := range []struct {
		name    string
		logKeys bool
		level   slog.Level
		want    string // in the info-level log; "" for nothing
	}{
		{"hashed", false, 0, "key=p:~"},
		{"raw on request", true, 0, "key=p:sk_live_SECRET"},
		{"debug", false, slog.LevelDebug, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			m := mustNew(t, httplimit.Config{
				Limiter: newStore(t, clocktest.At(minute0)),
				Policies: []httplimit.Policy{{Name: "p", Key: httplimit.Header("X-Api-Key"),
					Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Minute}}},
				Logger:       slog.New(slog.NewTextHandler(&logs, nil)),
				LogKeys:      tc.logKeys,
				RefusalLevel: tc.level,
			})
			h := m.Handler(http.HandlerFunc(ok))
			for range 2 {
				r := httptest.NewRequest("GET", "/", nil)
				r.Header.Set("X-Api-Key", "sk_live_SECRET")
				do(h, r)
			}
			got := logs.String()
			if tc.want == "" {
				if got != "" {
					t.Fatalf("logged at info: %s", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || strings.Count(got, "\n") != 1 {
				t.Fatalf("log %q, want one line with %q", got, tc.want)
			}
			if !tc.logKeys && strings.Contains(got, "SECRET") {
				t.Fatalf("the key reached the log: %s", got)
			}
		})
	}
}

// Ready runs after the rate limits and before the concurrency slots: it
// sees no slot taken, and a request it answers takes none.
func TestReadyBeforeSlots(t *testing.T) {
	slots := new(httplimit.Slots)
	during := -1
	reached := false
	m := mustNew(t, httplimit.Config{
		Limiter: newStore(t, clocktest.At(minute0)),
		Policies: []httplimit.Policy{{Name: "p", Key: httplimit.Global(),
			Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: time.Minute}}},
		Concurrency: []httplimit.ConcurrencyPolicy{{Name: "c", Max: 1, Slots: slots}},
		Ready: func(w http.ResponseWriter, r *http.Request) bool {
			during = slots.InFlight("")
			w.WriteHeader(http.StatusRequestTimeout)
			return false
		},
	})
	rec := do(m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true })), httptest.NewRequest("POST", "/", nil))
	if rec.Code != http.StatusRequestTimeout || reached || during != 0 || slots.InFlight("") != 0 {
		t.Fatalf("status %d, handler reached %v, slots during Ready %d, after %d", rec.Code, reached, during, slots.InFlight(""))
	}
}
