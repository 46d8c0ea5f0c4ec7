package httplimit_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/httplimittest"
	"github.com/sluicehq/sluice/memstore"
)

// The Observer is handed each policy's decision: an admitted request
// without its key, a refusal with the policy's final key, a shadow
// policy's would-be refusal as shadow, and an in-flight refusal.
func TestObserverSeesEveryDecision(t *testing.T) {
	store := memstore.New(memstore.Config{})
	defer store.Close()
	rec := &httplimittest.Recorder[httplimit.Decision]{}
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Hour}
	m, err := httplimit.New(httplimit.Config{
		Settings: httplimit.Settings{Limiter: store, Observer: rec, Logger: slog.New(slog.DiscardHandler)},
		Policies: []httplimit.Policy{
			{Name: "shadow", Key: httplimit.Header("X-User"), Limit: lim, Shadow: true},
			{Name: "user", Key: httplimit.Header("X-User"), Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 2, Period: time.Hour}},
		},
		Concurrency: []httplimit.ConcurrencyPolicy{{Name: "conns", Max: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Hold") != "" {
			entered <- struct{}{}
			<-block
		}
	}))
	send := func(user string, hold bool) int {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-User", user)
		if hold {
			r.Header.Set("X-Hold", "1")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	codes := []int{send("alice", false), send("alice", false), send("alice", false)}
	if !slices.Equal(codes, []int{200, 200, 429}) {
		t.Fatalf("codes %v", codes)
	}
	done := make(chan int)
	go func() { done <- send("bob", true) }()
	<-entered
	if c := send("carol", false); c != 429 {
		t.Fatalf("carol while bob holds the slot: %d, want 429", c)
	}
	close(block)
	<-done

	A, L, S := httplimit.Allowed, httplimit.Limited, httplimit.Shadow
	want := []httplimit.Decision{
		{Policy: "shadow", Outcome: A, Cost: 1}, {Policy: "user", Outcome: A, Cost: 1},
		{Policy: "shadow", Outcome: S, Cost: 1, Key: "shadow:alice"}, {Policy: "user", Outcome: A, Cost: 1},
		{Policy: "shadow", Outcome: S, Cost: 1, Key: "shadow:alice"}, {Policy: "user", Outcome: L, Cost: 1, Key: "user:alice"},
		{Policy: "shadow", Outcome: A, Cost: 1}, {Policy: "user", Outcome: A, Cost: 1}, // bob
		{Policy: "shadow", Outcome: A, Cost: 1}, {Policy: "user", Outcome: A, Cost: 1}, // carol's rate limits
		{Policy: "conns", Outcome: L, Cost: 1}, // carol's slot
	}
	if got := rec.Decisions(); !slices.Equal(got, want) {
		t.Errorf("observed\n%+v\nwant\n%+v", got, want)
	}
}
