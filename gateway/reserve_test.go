package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// heldLogins is an upstream whose /login answers 401 (200 with ?ok=1) once
// release is closed; each request that reaches it is counted in reached
// and announced on arrived first.
func heldLogins(t *testing.T, arrived chan<- struct{}, release <-chan struct{}, reached *atomic.Int32) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		if r.URL.Query().Get("ok") != "1" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// burst sends n concurrent POSTs of path as user through srv while the
// upstream holds the requests that reach it: it waits until each request
// has either reached the upstream (arrived) or been answered without it,
// then releases the upstream, and returns the statuses counted.
func burst(t *testing.T, srv *httptest.Server, n int, path string, arrived chan struct{}, release chan struct{}) map[int]int {
	t.Helper()
	events := make(chan int, n)
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, err := http.NewRequest("POST", srv.URL+path, nil)
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("X-User", "ann")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				events <- 0
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			statuses <- resp.StatusCode
			if resp.StatusCode == http.StatusTooManyRequests {
				events <- resp.StatusCode // answered without the upstream
			}
		})
	}
	timeout := time.After(20 * time.Second)
	for seen := 0; seen < n; seen++ {
		select {
		case <-arrived:
		case <-events:
		case <-timeout:
			close(release)
			t.Fatalf("after %d of %d requests, the others neither reached the upstream nor were answered", seen, n)
		}
	}
	close(release)
	wg.Wait()
	close(statuses)
	got := map[int]int{}
	for s := range statuses {
		got[s]++
	}
	return got
}

// A rule that counts failed logins reserves a unit before it forwards: 60
// concurrent failed logins against 3 failures a minute send at most 3 to
// the upstream (the others get 429), however they race, and the penalty
// box they open lasts the penalty, not twice it. On memory (a fake clock:
// Retry-After exactly 600) and on Redis (its own clock: 599 or 600; a token
// bucket of 3 an hour there, as a minute's window could end mid-burst on
// Redis's clock and give 3 more).
func TestProxyConcurrentFailuresReachTheUpstreamAtMostTheLimit(t *testing.T) {
	for _, kind := range []string{"memory", "redis"} {
		t.Run(kind, func(t *testing.T) {
			arrived, release := make(chan struct{}, 60), make(chan struct{})
			var reached atomic.Int32
			up := heldLogins(t, arrived, release, &reached)
			name := "logins" + strconv.FormatInt(time.Now().UnixNano(), 36) // Redis outlives a -count=N run
			rate := "3r/m, algorithm: fixed_window"
			if kind == "redis" {
				rate = "3r/h, burst: 3, algorithm: token_bucket"
			}
			f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: "+up.URL+`
limits:
  - {name: `+name+`, key: "header:X-User", rate: `+rate+`, count_responses: [401, 403], penalty: 10m}
routes: [{name: login, match: /login, limits: [`+name+`]}]
`))
			if err != nil {
				t.Fatal(err)
			}
			minRetry := 600
			if kind == "memory" {
				f.Config.Limiter = store(t, clocktest.At(time.Unix(1700000040, 0)))
			} else {
				rs, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://" + redistest.Single(t).Addr})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { rs.Close() })
				f.Config.Limiter, minRetry = rs, 599
			}
			_, srv := front(t, f.Config)
			got := burst(t, srv, 60, "/login", arrived, release)
			if n := reached.Load(); n != 3 || got[401] != 3 || got[429] != 57 {
				t.Errorf("60 concurrent failed logins, 3 failures allowed: %d reached the upstream, statuses %v; want 3, 3 × 401 and 57 × 429", n, got)
			}
			resp := postAs(t, srv, "ann", "/login?ok=1")
			ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
			if resp.StatusCode != 429 || ra < minRetry || ra > 600 {
				t.Fatalf("after the burst: %d, Retry-After %q; want 429 and the penalty, 600 s (not twice it)", resp.StatusCode, resp.Header.Get("Retry-After"))
			}
		})
	}
}

// Successful logins take a reservation while they are upstream and give it
// back once they answer 200: a burst of them passes whole, and afterwards
// the whole failure allowance is left.
func TestProxySuccessesGiveBackTheFailureReservation(t *testing.T) {
	clock := clocktest.At(time.Unix(1700000040, 0))
	srv := proxyFile(t, accounts(t), clock, `
limits:
  - {name: failed-logins, key: "header:X-User", rate: 3r/m, algorithm: fixed_window, count_responses: [401, 403], penalty: 10m}
routes: [{name: login, match: /login, limits: [failed-logins]}]
`)
	for i := range 10 {
		if resp := postAs(t, srv, "ann", "/login?ok=1"); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("RateLimit"), `"failed-logins";r=2;`) {
			t.Fatalf("successful login %d: %d, RateLimit %q; want 200, r=2 (its own reservation)", i+1, resp.StatusCode, resp.Header.Get("RateLimit"))
		}
	}
	for i := range 3 {
		if resp := postAs(t, srv, "ann", "/login"); resp.StatusCode != 401 {
			t.Fatalf("failed login %d after 10 successes: %d, want the upstream's 401 (successes spent nothing)", i+1, resp.StatusCode)
		}
	}
	if resp := postAs(t, srv, "ann", "/login?ok=1"); resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "600" {
		t.Fatalf("after 3 failures: %d, Retry-After %q; want 429, 600", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}
