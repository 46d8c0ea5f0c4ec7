package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// login answers 401 unless the request carries ?ok=1.
var login = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("ok") != "1" {
		w.WriteHeader(http.StatusUnauthorized)
	}
})

func newLoginGuard(t *testing.T, clock sluice.Clock) http.Handler {
	t.Helper()
	store := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	failed, err := httplimit.ParseStatusSet("401", "403")
	if err != nil {
		t.Fatal(err)
	}
	m, err := httplimit.New(httplimit.Config{
		Settings: httplimit.Settings{Limiter: store},
		Policies: []httplimit.Policy{{
			Name: "failed-logins", Key: httplimit.Header("X-User"),
			Limit:     sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: time.Minute},
			CountOnly: failed, Penalty: 10 * time.Minute,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m.Handler(login)
}

func attempt(h http.Handler, user string, ok bool) *httptest.ResponseRecorder {
	target := "/login"
	if ok {
		target += "?ok=1"
	}
	r := httptest.NewRequest("POST", target, nil)
	r.Header.Set("X-User", user)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Five failed logins within a minute put the key in the penalty box for ten
// minutes: even a good password is refused, with the reason header naming
// the policy, until the box ends, on time. Successful logins do not count,
// and another key is not boxed.
func TestFailedLoginsPutTheKeyInThePenaltyBox(t *testing.T) {
	clock := clocktest.At(minute0)
	h := newLoginGuard(t, clock)
	for range 20 {
		if w := attempt(h, "ann", true); w.Code != http.StatusOK {
			t.Fatalf("a successful login answered %d: successes must not count", w.Code)
		}
	}
	for i := range 5 {
		clock.Advance(10 * time.Second)
		if w := attempt(h, "ann", false); w.Code != http.StatusUnauthorized {
			t.Fatalf("failed login %d answered %d, want 401 from the handler", i+1, w.Code)
		}
	}
	boxedAt := clock.Now()
	w := attempt(h, "ann", true)
	if w.Code != http.StatusTooManyRequests || w.Header().Get(httplimit.ReasonHeader) != "failed-logins" || w.Header().Get("Retry-After") != "600" {
		t.Fatalf("after 5 failures: %d, reason %q, Retry-After %q; want 429, failed-logins, 600", w.Code, w.Header().Get(httplimit.ReasonHeader), w.Header().Get("Retry-After"))
	}
	if w := attempt(h, "bob", true); w.Code != http.StatusOK {
		t.Errorf("another key answered %d: the box is ann's alone", w.Code)
	}
	clock.Set(boxedAt.Add(10*time.Minute - time.Millisecond))
	if w := attempt(h, "ann", true); w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Errorf("1 ms before the box ends: %d, Retry-After %q; want 429, 1", w.Code, w.Header().Get("Retry-After"))
	}
	clock.Advance(time.Millisecond)
	if w := attempt(h, "ann", true); w.Code != http.StatusOK {
		t.Errorf("when the box ends: %d, want 200", w.Code)
	}
}

// Failures spread over more than a minute do not reach the count: four in
// one window and four in the next leave the key free.
func TestFailuresInSeparateWindowsDoNotBox(t *testing.T) {
	clock := clocktest.At(minute0)
	h := newLoginGuard(t, clock)
	for range 4 {
		attempt(h, "ann", false)
	}
	clock.Advance(time.Minute)
	for range 4 {
		attempt(h, "ann", false)
	}
	if w := attempt(h, "ann", true); w.Code != http.StatusOK {
		t.Errorf("after 4 + 4 failures in two windows: %d, want 200", w.Code)
	}
}

// costly answers with the cost its request names in ?cost=, in the
// Sluice-Cost header, or in a trailer with ?trailer=1.
var costly = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	c := r.URL.Query().Get("cost")
	if r.URL.Query().Get("trailer") == "1" {
		w.Header().Set("Trailer", "Sluice-Cost")
		w.Write([]byte("body"))
		w.Header().Set("Sluice-Cost", c)
		return
	}
	w.Header().Set("Sluice-Cost", c)
})

func newSettling(t *testing.T, clock sluice.Clock, settle *httplimit.Settle) http.Handler {
	t.Helper()
	store := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	m, err := httplimit.New(httplimit.Config{
		Settings: httplimit.Settings{Limiter: store},
		Policies: []httplimit.Policy{{
			Name: "tokens", Key: httplimit.Header("X-User"),
			Limit:  sluice.PerMinute(10), // a token every 6 s, burst 10
			Settle: settle,
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m.Handler(costly)
}

func call(h http.Handler, query string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", "/v1/complete?"+query, nil)
	r.Header.Set("X-User", "ann")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// The actual cost from the response header settles the estimate: the next
// response's RateLimit says what is truly left, a cost below the estimate
// is refunded, and a cost past the allowance puts the key in debt, so that
// its next request waits exactly what it owes.
func TestSettleFromTheCostHeader(t *testing.T) {
	for _, trailer := range []string{"0", "1"} {
		t.Run("trailer="+trailer, func(t *testing.T) {
			clock := clocktest.At(minute0)
			h := newSettling(t, clock, &httplimit.Settle{})
			steps := []struct {
				cost      int
				rateLimit string // of this response, made before its own settle
			}{
				{7, `"tokens";r=9;t=6`},  // estimate 1; 7 settled after
				{0, `"tokens";r=2;t=48`}, // 7 + 1 spent; refunded to 7 after
				{1, `"tokens";r=2;t=48`}, // 7 + 1 spent; 8 after
				{11, `"tokens";r=1;t=54`},
			}
			for i, s := range steps {
				w := call(h, "cost="+strconv.Itoa(s.cost)+"&trailer="+trailer)
				if w.Code != http.StatusOK || w.Header().Get("RateLimit") != s.rateLimit {
					t.Fatalf("step %d: %d, RateLimit %q; want 200, %q", i, w.Code, w.Header().Get("RateLimit"), s.rateLimit)
				}
			}
			// 19 spent of 10: the key owes 9 units, 54 s, and the next
			// request's own unit takes 6 s more.
			w := call(h, "cost=1&trailer="+trailer)
			if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "60" {
				t.Fatalf("in debt: %d, Retry-After %q; want 429, 60", w.Code, w.Header().Get("Retry-After"))
			}
			clock.Advance(60*time.Second - time.Nanosecond)
			if w := call(h, "cost=1&trailer="+trailer); w.Code != http.StatusTooManyRequests {
				t.Errorf("1 ns before the debt is paid: %d, want 429", w.Code)
			}
			clock.Advance(time.Nanosecond)
			if w := call(h, "cost=1&trailer="+trailer); w.Code != http.StatusOK {
				t.Errorf("when the debt is paid: %d, want 200", w.Code)
			}
		})
	}
}

// A cost that is not a whole number leaves the estimate spent; a callback
// can give the cost instead of a header.
func TestSettleIgnoresBadCostsAndTakesACallback(t *testing.T) {
	clock := clocktest.At(minute0)
	h := newSettling(t, clock, &httplimit.Settle{})
	for _, bad := range []string{"-3", "1e3", "99999999999999999999", "%20"} {
		call(h, "cost="+bad)
	}
	if got := call(h, "cost=1").Header().Get("RateLimit"); got != `"tokens";r=5;t=30` {
		t.Errorf("after 4 bad costs: RateLimit %q, want the 4 estimates spent", got)
	}
	h = newSettling(t, clocktest.At(minute0), &httplimit.Settle{Cost: func(r *http.Request, status int, _ http.Header) (int, bool) {
		return 4, status == http.StatusOK
	}})
	call(h, "")
	if got := call(h, "").Header().Get("RateLimit"); got != `"tokens";r=5;t=30` {
		t.Errorf("after a callback's cost of 4: RateLimit %q, want 4 + 1 spent", got)
	}
}

// A policy counting 404s on a token bucket refuses a key with nothing left
// until exactly one unit has come back, not until the bucket is full.
func TestCountedTokenBucketRefusesUntilOneUnitReturns(t *testing.T) {
	clock := clocktest.At(minute0)
	store := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { store.Close() })
	notFound, _ := httplimit.ParseStatusSet("404")
	m, err := httplimit.New(httplimit.Config{Settings: httplimit.Settings{Limiter: store}, Policies: []httplimit.Policy{{
		Name: "scanners", Key: httplimit.Header("X-User"), Limit: sluice.PerMinute(3), CountOnly: notFound,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Handler(http.NotFoundHandler())
	for range 3 {
		if w := call(h, ""); w.Code != http.StatusNotFound {
			t.Fatalf("a counted 404: %d", w.Code)
		}
	}
	w := call(h, "")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "20" {
		t.Fatalf("after 3 404s of 3/min: %d, Retry-After %q; want 429, 20 (one unit back)", w.Code, w.Header().Get("Retry-After"))
	}
	clock.Advance(20*time.Second - time.Nanosecond)
	if w := call(h, ""); w.Code != http.StatusTooManyRequests {
		t.Errorf("1 ns before a unit is back: %d", w.Code)
	}
	clock.Advance(time.Nanosecond)
	if w := call(h, ""); w.Code != http.StatusNotFound {
		t.Errorf("when a unit is back: %d, want the handler's 404", w.Code)
	}
}
