package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rlheader"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// minute0 is a minute boundary (1700000040 is a multiple of 60), so a
// fixed window of 60 s starts there.
var minute0 = time.Unix(1700000040, 0)

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

func newStore(t testing.TB, clock sluice.Clock) *memstore.Store {
	s := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { s.Close() })
	return s
}

func mustNew(t testing.TB, cfg httplimit.Config) *httplimit.Middleware {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	m, err := httplimit.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func do(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// holding is a handler that keeps the requests for /hold in flight: each
// sends on entered as it arrives, and all return once release is closed.
// Other paths get 200 at once.
func holding() (h http.HandlerFunc, entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
	}, entered, release
}

// The draft-11 contract, cases A1–A3: a fixed window of 100 per minute.
func TestContract(t *testing.T) {
	clock := clocktest.At(minute0)
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clock)},
		Policies: []httplimit.Policy{{
			Name: "default", Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Minute},
			Key: httplimit.Global(),
		}},
	})
	h := m.Handler(http.HandlerFunc(ok))
	req := func() *httptest.ResponseRecorder { return do(h, httptest.NewRequest("GET", "/", nil)) }

	w := req()
	if w.Code != 200 || w.Header().Get("RateLimit-Policy") != `"default";q=100;w=60` || w.Header().Get("RateLimit") != `"default";r=99;t=60` {
		t.Fatalf("A1: %d %q %q", w.Code, w.Header().Get("RateLimit-Policy"), w.Header().Get("RateLimit"))
	}
	clock.Advance(30 * time.Second)
	for range 98 {
		req()
	}
	w = req()
	if w.Code != 200 || w.Header().Get("RateLimit") != `"default";r=0;t=30` {
		t.Fatalf("A2: %d %q", w.Code, w.Header().Get("RateLimit"))
	}
	w = req()
	if w.Code != 429 || w.Header().Get("Retry-After") != "30" || w.Header().Get("RateLimit") != `"default";r=0;t=30` {
		t.Fatalf("A3: %d Retry-After %q RateLimit %q", w.Code, w.Header().Get("Retry-After"), w.Header().Get("RateLimit"))
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("A3: Content-Type %q", ct)
	}
	const body = `{"type":"https://iana.org/assignments/http-problem-types#quota-exceeded","title":"Quota Exceeded","status":429,"violated-policies":["default"]}`
	if got := w.Body.String(); got != body {
		t.Errorf("A3 body:\n%s\nwant\n%s", got, body)
	}
	if w.Header().Get("Cache-Control") != "no-store" || w.Header().Get(httplimit.ReasonHeader) != "default" {
		t.Errorf("A3: Cache-Control %q, reason %q", w.Header().Get("Cache-Control"), w.Header().Get(httplimit.ReasonHeader))
	}
	// The headers parse back as the draft says.
	st, err := rlheader.ParseStatuses(w.Header().Values("RateLimit"))
	if err != nil || len(st) != 1 || st[0].Remaining != 0 || st[0].Reset != 30*time.Second {
		t.Errorf("RateLimit parses back as %+v, %v", st, err)
	}
	ra, ok := rlheader.ParseRetryAfter(w.Header().Get("Retry-After"), clock.Now())
	if !ok {
		t.Fatalf("Retry-After %q does not parse", w.Header().Get("Retry-After"))
	}
	if ra < st[0].Reset {
		t.Errorf("Retry-After %v earlier than the effective window %v", ra, st[0].Reset)
	}
}

// Case A4 and the choice of the policy closest to exhaustion; a refusal
// by the second policy gives the first its unit back.
func TestTwoPolicies(t *testing.T) {
	clock := clocktest.At(minute0)
	store := newStore(t, clock)
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: store, Headers: rlheader.Both},
		Policies: []httplimit.Policy{
			{Name: "permin", Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 50, Period: time.Minute}, Key: httplimit.Header("X-Api-Key")},
			{Name: "perhr", Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 3, Period: time.Hour}, Key: httplimit.Header("X-Api-Key")},
		},
	})
	h := m.Handler(http.HandlerFunc(ok))
	req := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("X-Api-Key", "k1")
		return do(h, r)
	}
	w := req()
	if got := w.Header().Get("RateLimit-Policy"); got != `"permin";q=50;w=60, "perhr";q=3;w=3600` {
		t.Fatalf("A4: RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"perhr";r=2;`) {
		t.Errorf("RateLimit %q, want the hourly policy (2 of 3 left) reported", got)
	}
	if w.Header().Get("X-RateLimit-Limit") != "3" || w.Header().Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("legacy headers %v", w.Header())
	}
	req()
	req()
	w = req() // the hourly policy refuses
	if w.Code != 429 || w.Header().Get(httplimit.ReasonHeader) != "perhr" {
		t.Fatalf("4th request: %d, reason %q", w.Code, w.Header().Get(httplimit.ReasonHeader))
	}
	// permin spent 3, not 4: the refused request's unit came back.
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 50, Period: time.Minute}
	r, err := store.AllowN(context.Background(), "permin:k1", lim, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining != 46 {
		t.Errorf("permin has %d left after 3 admitted requests and a refused one, want 46", r.Remaining)
	}
}

// 1,000 concurrent requests on one key admit exactly the allowance.
func TestConcurrentExact(t *testing.T) {
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0))},
		Policies: []httplimit.Policy{{Name: "p", Limit: sluice.PerMinute(100), Key: httplimit.Global()}},
	})
	var served atomic.Int64
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 1000 {
		wg.Go(func() {
			if do(h, httptest.NewRequest("GET", "/", nil)).Code == 429 {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if served.Load() != 100 || refused.Load() != 900 {
		t.Fatalf("served %d, refused %d; want 100 and 900", served.Load(), refused.Load())
	}
}

// A panicking handler releases its concurrency slot.
func TestConcurrencyReleasedOnPanic(t *testing.T) {
	m := mustNew(t, httplimit.Config{Concurrency: []httplimit.ConcurrencyPolicy{{Name: "inflight", Max: 1}}})
	panicky := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	func() {
		defer func() { recover() }()
		do(panicky, httptest.NewRequest("GET", "/", nil))
	}()
	if w := do(m.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil)); w.Code != 200 {
		t.Fatalf("after a panic the slot was not released: %d", w.Code)
	}
	// While one request is in flight, a second is refused and named.
	inside, release := make(chan struct{}), make(chan struct{})
	slow := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { close(inside); <-release }))
	go do(slow, httptest.NewRequest("GET", "/", nil))
	<-inside
	w := do(m.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil))
	close(release)
	if w.Code != 429 || w.Header().Get(httplimit.ReasonHeader) != "inflight" {
		t.Fatalf("second request in flight: %d, reason %q", w.Code, w.Header().Get(httplimit.ReasonHeader))
	}
}

func TestMissingKeyAndBadCost(t *testing.T) {
	store := newStore(t, clocktest.At(minute0))
	lim := sluice.PerMinute(10)
	reject := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: store}, Policies: []httplimit.Policy{{Name: "key", Limit: lim, Key: httplimit.Header("X-Api-Key")}}})
	if w := do(reject.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil)); w.Code != 400 {
		t.Errorf("missing key, RejectMissing: %d, want 400", w.Code)
	}
	skip := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: store}, Policies: []httplimit.Policy{{Name: "key", Limit: lim, Key: httplimit.Header("X-Api-Key"), OnMissingKey: httplimit.SkipMissing}}})
	w := do(skip.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil))
	if w.Code != 200 || w.Header().Get("RateLimit") != "" {
		t.Errorf("missing key, SkipMissing: %d, RateLimit %q; want 200 and no header", w.Code, w.Header().Get("RateLimit"))
	}
	for _, cost := range []int{0, -1, 11} {
		m := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: store}, Policies: []httplimit.Policy{{Name: "c", Limit: lim, Key: httplimit.Global(), Cost: func(*http.Request) int { return cost }}}})
		if w := do(m.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil)); w.Code != 500 {
			t.Errorf("cost %d: %d, want 500", cost, w.Code)
		}
	}
}

func TestShadow(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics, err := httplimit.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0))}, Metrics: metrics,
		Policies: []httplimit.Policy{{Name: "dry", Limit: sluice.PerMinute(2), Key: httplimit.Global(), Shadow: true}},
	})
	h := m.Handler(http.HandlerFunc(ok))
	for i := range 5 {
		w := do(h, httptest.NewRequest("GET", "/", nil))
		if w.Code != 200 || w.Header().Get("RateLimit") != "" {
			t.Fatalf("request %d: %d, RateLimit %q; a shadow policy never refuses or shows", i, w.Code, w.Header().Get("RateLimit"))
		}
	}
	if got := decisions(t, reg, "shadow_rejected"); got != 3 {
		t.Errorf("shadow_rejected = %v, want 3", got)
	}
}

// decisions returns the count of decisions with outcome in reg.
func decisions(t *testing.T, reg *prometheus.Registry, outcome string) float64 {
	t.Helper()
	return promtest.Value(t, reg, "sluice_http_decisions_total", "outcome", outcome)
}

// failing is a limiter whose store is down.
type failing struct{}

func (failing) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	return sluice.Result{}, errors.New("connection refused")
}

func TestStoreError(t *testing.T) {
	pol := []httplimit.Policy{{Name: "p", Limit: sluice.PerMinute(1), Key: httplimit.Global()}}
	open := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: failing{}}, Policies: pol})
	if w := do(open.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil)); w.Code != 200 {
		t.Errorf("store down, fail open: %d", w.Code)
	}
	closed := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: failing{}, StoreErrorStatus: 503}, Policies: pol})
	if w := do(closed.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil)); w.Code != 503 {
		t.Errorf("store down, StoreErrorStatus 503: %d", w.Code)
	}
}

// Route keys with Go 1.22 ServeMux patterns: one allowance per route, not
// per URL.
func TestRouteKeyIsOneAllowancePerRoute(t *testing.T) {
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0))},
		Policies: []httplimit.Policy{{Name: "route", Limit: sluice.PerMinute(2), Key: httplimit.Route()}},
	})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", m.Handler(http.HandlerFunc(ok)))
	mux.Handle("GET /users/{id}", m.Handler(http.HandlerFunc(ok)))
	codes := []int{}
	for _, path := range []string{"/items/1", "/items/2", "/items/3", "/users/1"} {
		codes = append(codes, do(mux, httptest.NewRequest("GET", path, nil)).Code)
	}
	if want := []int{200, 200, 429, 200}; !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
}

// Keys are scoped by policy and, when asked, hashed before they reach the
// store.
func TestKeysScopedByPolicyAndHashed(t *testing.T) {
	store := newStore(t, clocktest.At(minute0))
	m := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: store, HashKeys: true},
		Policies: []httplimit.Policy{{Name: "api", Limit: sluice.PerMinute(1), Key: httplimit.Header("X-Api-Key")}}})
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Api-Key", "secret-key-123")
	do(m.Handler(http.HandlerFunc(ok)), r)
	// The raw key was never used.
	if res, err := store.Allow(context.Background(), "api:secret-key-123", sluice.PerMinute(1)); err != nil {
		t.Fatal(err)
	} else if !res.Allowed {
		t.Fatal("the raw key reached the store")
	}
}

func TestConfigErrors(t *testing.T) {
	lim := sluice.PerMinute(1)
	for name, cfg := range map[string]httplimit.Config{
		"no limiter":     {Policies: []httplimit.Policy{{Name: "a", Limit: lim, Key: httplimit.Global()}}},
		"no policies":    {Settings: httplimit.Settings{Limiter: failing{}}},
		"no name":        {Settings: httplimit.Settings{Limiter: failing{}}, Policies: []httplimit.Policy{{Limit: lim, Key: httplimit.Global()}}},
		"duplicate name": {Settings: httplimit.Settings{Limiter: failing{}}, Policies: []httplimit.Policy{{Name: "a", Limit: lim, Key: httplimit.Global()}, {Name: "a", Limit: lim, Key: httplimit.Global()}}},
		"non-ASCII name": {Settings: httplimit.Settings{Limiter: failing{}}, Policies: []httplimit.Policy{{Name: "é", Limit: lim, Key: httplimit.Global()}}},
		"bad limit":      {Settings: httplimit.Settings{Limiter: failing{}}, Policies: []httplimit.Policy{{Name: "a", Key: httplimit.Global()}}},
		"no key":         {Settings: httplimit.Settings{Limiter: failing{}}, Policies: []httplimit.Policy{{Name: "a", Limit: lim}}},
		"status 399":     {Settings: httplimit.Settings{Limiter: failing{}, StatusCode: 399}, Policies: []httplimit.Policy{{Name: "a", Limit: lim, Key: httplimit.Global()}}},
		"zero max":       {Concurrency: []httplimit.ConcurrencyPolicy{{Name: "c"}}},
	} {
		if _, err := httplimit.New(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The headers parse with an independent RFC 9651 parser (cases A1 and A4).
func TestHeadersParseWithHTTPSFV(t *testing.T) {
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0))},
		Policies: []httplimit.Policy{
			{Name: "permin", Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 50, Period: time.Minute}, Key: httplimit.Global()},
			{Name: `a"b\c`, Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1000, Period: time.Hour}, Key: httplimit.Global()},
		},
	})
	w := do(m.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil))
	pol, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit-Policy"))
	if err != nil || len(pol) != 2 {
		t.Fatalf("RateLimit-Policy %q: %v", w.Header().Values("RateLimit-Policy"), err)
	}
	names := []string{"permin", `a"b\c`}
	quotas := []int64{50, 1000}
	for i, member := range pol {
		item, isItem := member.(httpsfv.Item)
		if !isItem || item.Value != names[i] {
			t.Fatalf("policy %d: %#v, want the string %q", i, member, names[i])
		}
		if q, _ := item.Params.Get("q"); q != quotas[i] {
			t.Errorf("policy %d: q = %v, want %d", i, q, quotas[i])
		}
	}
	st, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit"))
	if err != nil || len(st) != 1 {
		t.Fatalf("RateLimit %q: %v", w.Header().Values("RateLimit"), err)
	}
	if r, _ := st[0].(httpsfv.Item).Params.Get("r"); r != int64(49) {
		t.Errorf("RateLimit r = %v, want 49 (the per-minute policy is closest to exhaustion)", r)
	}
}

// A key longer than MaxKeyLen is hashed, never stored as is.
func TestOversizedKeyHashed(t *testing.T) {
	store := newStore(t, clocktest.At(minute0))
	lim := sluice.PerMinute(1)
	m := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: store}, Policies: []httplimit.Policy{{Name: "big", Limit: lim, Key: httplimit.Header("X-Big")}}})
	big := strings.Repeat("k", 5000)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Big", big)
	if w := do(m.Handler(http.HandlerFunc(ok)), r); w.Code != 200 {
		t.Fatalf("a request with a 5,000-byte key: %d, want 200", w.Code)
	}
	if w := do(m.Handler(http.HandlerFunc(ok)), r); w.Code != 429 {
		t.Fatalf("the second request with the same long key: %d, want 429 (same hashed key)", w.Code)
	}
}

// Case A10, the documented choice: a redirect carries the headers like any
// response, r=0 included; they are information, and a client that honours
// Retry-After only on 429 is not stalled by them.
func TestRedirectKeepsHeaders(t *testing.T) {
	m := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0))},
		Policies: []httplimit.Policy{{Name: "p", Limit: sluice.PerMinute(1), Key: httplimit.Global()}}})
	redirect := m.Handler(http.RedirectHandler("/elsewhere", http.StatusFound))
	w := do(redirect, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusFound || !strings.Contains(w.Header().Get("RateLimit"), "r=0") {
		t.Fatalf("redirect: %d, RateLimit %q", w.Code, w.Header().Get("RateLimit"))
	}
}

// closedStore is a limiter that fails closed, as failsafe's Closed mode does.
type closedStore struct{}

func (closedStore) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	return sluice.Result{RetryAfter: 3 * time.Second}, fmt.Errorf("%w: connection refused", sluice.ErrUnavailable)
}

// A limiter that fails closed refuses the request even when store errors
// otherwise fail open.
func TestFailClosedRefuses(t *testing.T) {
	m := mustNew(t, httplimit.Config{Settings: httplimit.Settings{Limiter: closedStore{}}, Policies: []httplimit.Policy{{Name: "p", Limit: sluice.PerMinute(1), Key: httplimit.Global()}}})
	w := do(m.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "3" {
		t.Fatalf("fail-closed limiter: %d, Retry-After %q; want 503 and 3", w.Code, w.Header().Get("Retry-After"))
	}
}
