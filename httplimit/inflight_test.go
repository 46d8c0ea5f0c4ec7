package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/httplimittest"
)

// countingInFlight is an InFlight that records its keys and releases, or
// fails with err.
type countingInFlight struct {
	mu       sync.Mutex
	slots    httplimit.Slots
	keys     []string
	released int
	err      error
}

func (c *countingInFlight) Acquire(ctx context.Context, key string, max int) (func(), bool, error) {
	c.mu.Lock()
	c.keys = append(c.keys, key)
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	rel, ok, _ := c.slots.Acquire(ctx, key, max)
	if !ok {
		return nil, false, nil
	}
	return func() {
		c.mu.Lock()
		c.released++
		c.mu.Unlock()
		rel()
	}, true, nil
}

// Two Middlewares (two proxies) on one InFlight admit Max requests of a
// key together, hand it the scoped key, and release each slot once.
func TestInFlightSharedByMiddlewares(t *testing.T) {
	in := &countingInFlight{}
	pol := []httplimit.ConcurrencyPolicy{{Name: "conn", Max: 1, Key: httplimit.Header("X-Key"), InFlight: in}}
	a := mustNew(t, httplimit.Config{Concurrency: pol})
	seen := &httplimittest.Recorder[httplimit.Decision]{}
	b := mustNew(t, httplimit.Config{Concurrency: pol, Settings: httplimit.Settings{ConcurrencyStatusCode: 503, Observer: seen}})
	inside, leave := make(chan struct{}), make(chan struct{})
	slow := a.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(inside); <-leave }))
	req := func() *http.Request {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Key", "k")
		return r
	}
	done := make(chan struct{})
	go func() { defer close(done); do(slow, req()) }()
	<-inside
	if w := do(b.Handler(http.HandlerFunc(ok)), req()); w.Code != 503 || w.Header().Get(httplimit.ReasonHeader) != "conn" {
		t.Fatalf("second request on the other middleware: %d %q; want 503 by conn", w.Code, w.Header().Get(httplimit.ReasonHeader))
	}
	if ds := seen.Decisions(); len(ds) != 1 || ds[0].Policy != "conn" || ds[0].Outcome != httplimit.Limited {
		t.Fatalf("observed %+v; want one limited decision of conn", ds)
	}
	close(leave)
	<-done
	if w := do(b.Handler(http.HandlerFunc(ok)), req()); w.Code != 200 {
		t.Fatalf("after the first ended: %d; want 200", w.Code)
	}
	if in.released != 2 || in.keys[0] != "conn:k" {
		t.Fatalf("released %d, keys %q; want 2 releases of conn:k", in.released, in.keys)
	}
	global := &countingInFlight{}
	g := mustNew(t, httplimit.Config{Concurrency: []httplimit.ConcurrencyPolicy{{Name: "all", Max: 1, InFlight: global}}})
	do(g.Handler(http.HandlerFunc(ok)), req())
	if global.keys[0] != "all:" {
		t.Fatalf("a policy without Key counted under %q; want all:", global.keys[0])
	}
}

// A failing InFlight fails open, unless it says closed (refused with the
// conn status) or StoreErrorStatus is set (refused with it).
func TestInFlightFailurePolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status int
		want   int
	}{
		{"open", errors.New("redis down"), 0, 200},
		{"closed", sluice.ErrUnavailable, 0, 503},
		{"store error status", errors.New("redis down"), 502, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &countingInFlight{err: tc.err}
			m := mustNew(t, httplimit.Config{
				Concurrency: []httplimit.ConcurrencyPolicy{{Name: "conn", Max: 1, InFlight: in}},
				Settings:    httplimit.Settings{ConcurrencyStatusCode: 503, StoreErrorStatus: tc.status},
			})
			if w := do(m.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil)); w.Code != tc.want {
				t.Fatalf("status %d; want %d", w.Code, tc.want)
			}
		})
	}
}

// A policy given both Slots and InFlight is refused: one would be ignored.
func TestInFlightAndSlotsRefused(t *testing.T) {
	_, err := httplimit.New(httplimit.Config{Concurrency: []httplimit.ConcurrencyPolicy{{Name: "c", Max: 1, Slots: new(httplimit.Slots), InFlight: &countingInFlight{}}}})
	if err == nil {
		t.Fatal("both accepted")
	}
}
