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
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/rlheader"
)

// NGINX runs limit_req before limit_conn: a request waiting its turn in a
// queue holds no concurrency slot, and takes one once it proceeds.
func TestQueuedRequestHoldsNoConcurrencySlot(t *testing.T) {
	slots := new(httplimit.Slots)
	during := -1
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0)), Wait: func(context.Context, time.Duration) error {
			during = slots.InFlight("")
			return nil
		}},
		Policies: []httplimit.Policy{{
			Name: "q", Queue: &queue.Config{Rate: 1, Period: time.Minute, Burst: 5}, Key: httplimit.Global(),
		}},
		Concurrency: []httplimit.ConcurrencyPolicy{{Name: "c", Max: 1, Slots: slots}},
	})
	inHandler := -1
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inHandler = slots.InFlight("")
	}))
	for i := range 2 {
		if code := do(h, httptest.NewRequest("GET", "/", nil)).Code; code != 200 {
			t.Fatalf("request %d: %d", i, code)
		}
	}
	if during != 0 || inHandler != 1 {
		t.Fatalf("slots in flight: %d while queued (want 0), %d in the handler (want 1)", during, inHandler)
	}
}

// A request refused for concurrency spends no rate limit, and its refusal
// shows the concurrency policy only.
func TestConcurrencyRefusalSpendsNoRate(t *testing.T) {
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0)), ConcurrencyStatusCode: http.StatusServiceUnavailable, Headers: rlheader.Both},
		Policies: []httplimit.Policy{{
			Name: "r", Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 2, Period: time.Minute}, Key: httplimit.Global(),
		}},
		Concurrency: []httplimit.ConcurrencyPolicy{{Name: "c", Max: 1}},
	})
	hold, entered, release := holding()
	h := m.Handler(hold)
	done := make(chan int)
	go func() { done <- do(h, httptest.NewRequest("GET", "/hold", nil)).Code }()
	<-entered
	w := do(h, httptest.NewRequest("GET", "/", nil))
	close(release)
	if first := <-done; first != 200 {
		t.Fatalf("first: %d", first)
	}
	if w.Code != http.StatusServiceUnavailable || w.Header().Get(httplimit.ReasonHeader) != "c" ||
		w.Header().Get("RateLimit") != "" || w.Header().Get("X-RateLimit-Remaining") != "" {
		t.Fatalf("second in flight: %d %v", w.Code, w.Header())
	}
	if code := do(h, httptest.NewRequest("GET", "/", nil)).Code; code != 200 {
		t.Fatalf("third: %d, want 200 (the refused one spent nothing)", code)
	}
}
