package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/rlheader"
)

// slowBackend is a handler of workers workers that each serve a request in
// service; past workers requests in flight, the rest wait their turn, so
// latency grows with concurrency (Little's law). Run inside a synctest
// bubble, its time is the bubble's.
func slowBackend(workers int, service time.Duration) http.Handler {
	sem := make(chan struct{}, workers)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sem <- struct{}{}
		time.Sleep(service)
		<-sem
		w.WriteHeader(http.StatusOK)
	})
}

type loadResult struct {
	mu      sync.Mutex
	served  map[adaptive.Priority]int
	shed    map[adaptive.Priority]int
	badShed int // 503s without Retry-After or with the wrong reason
	worst   time.Duration
}

// closedLoop runs clients goroutines, half of them sheddable and half
// critical (the Sluice-Priority header), each sending a request after
// the last one's answer (after 5 ms when it was refused), for d of the
// bubble's time; latencies after settle count towards worst.
func closedLoop(h http.Handler, clients int, d, settle time.Duration) *loadResult {
	res := &loadResult{served: map[adaptive.Priority]int{}, shed: map[adaptive.Priority]int{}}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range clients {
		p := adaptive.Critical
		if i%2 == 0 {
			p = adaptive.Sheddable
		}
		wg.Go(func() {
			for time.Since(start) < d {
				r := httptest.NewRequest(http.MethodGet, "/work", nil)
				r.Header.Set("Sluice-Priority", p.String())
				t0 := time.Now()
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				took := time.Since(t0)
				res.mu.Lock()
				if w.Code == http.StatusServiceUnavailable {
					res.shed[p]++
					if w.Header().Get("Retry-After") == "" || w.Header().Get(rlheader.HeaderReason) != "backend" {
						res.badShed++
					}
				} else {
					res.served[p]++
					if time.Since(start) > settle {
						res.worst = max(res.worst, took)
					}
				}
				res.mu.Unlock()
				if w.Code == http.StatusServiceUnavailable {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return res
}

// A backend of 4 workers of 10 ms each, sent 40 requests at once by 40
// clients: through an AdaptivePolicy the in-flight limit falls from 40
// to near the backend's 4 workers, the excess is shed with 503 and
// Retry-After (sheddable requests first), latency stays near the
// unloaded 10 ms instead of 100 ms, and the gauges show the limit.
func TestAdaptivePolicyShedsWhenTheBackendSlowsPastCapacity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, err := adaptive.New(adaptive.Config{
			Algorithm: adaptive.AIMD{Timeout: 15 * time.Millisecond},
			Initial:   40, Min: 1, Max: 100,
			Window: 50 * time.Millisecond, MinSamples: 5,
		})
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		metrics, err := httplimit.NewMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		m := mustNew(t, httplimit.Config{
			Adaptive: []httplimit.AdaptivePolicy{{
				Name: "backend", Limiter: lim,
				Priority: httplimit.PriorityFromHeader("Sluice-Priority", adaptive.Default),
			}},
			Metrics: metrics,
		})
		res := closedLoop(m.Handler(slowBackend(4, 10*time.Millisecond)), 40, 5*time.Second, 2*time.Second)

		limit := lim.Limit()
		t.Logf("final limit %d; served %v, shed %v; worst latency after 2 s %v", limit, res.served, res.shed, res.worst)
		if limit >= 10 {
			t.Errorf("limit %d, want it to have fallen from 40 to near the backend's 4 workers", limit)
		}
		if res.badShed > 0 {
			t.Errorf("%d refusals lack Retry-After or the reason header", res.badShed)
		}
		if res.worst > 40*time.Millisecond {
			t.Errorf("worst latency %v once settled, want it near the unloaded 10 ms (unlimited: 100 ms)", res.worst)
		}
		rate := func(p adaptive.Priority) float64 {
			return float64(res.shed[p]) / float64(res.shed[p]+res.served[p])
		}
		if !(rate(adaptive.Sheddable) > rate(adaptive.Critical)) {
			t.Errorf("refused: sheddable %.2f, critical %.2f; want sheddable refused first", rate(adaptive.Sheddable), rate(adaptive.Critical))
		}
		if got := promtest.Value(t, reg, "sluice_http_adaptive_limit", "", ""); got != float64(limit) {
			t.Errorf("sluice_http_adaptive_limit = %v, want %d", got, limit)
		}
		if got := promtest.Value(t, reg, "sluice_http_adaptive_latency_seconds", "", ""); got <= 0 {
			t.Errorf("sluice_http_adaptive_latency_seconds = %v, want the last window's mean", got)
		}
		if n := decisions(t, reg, "shed"); n != float64(res.shed[adaptive.Sheddable]+res.shed[adaptive.Critical]) {
			t.Errorf("shed counted %v, want %d", n, res.shed[adaptive.Sheddable]+res.shed[adaptive.Critical])
		}
	})
}

// A request the adaptive policy sheds spends no rate limit: what the rate
// policy charged is given back, and its RateLimit headers are not sent.
func TestAdaptiveRefusalGivesBackTheRateLimit(t *testing.T) {
	lim, err := adaptive.New(adaptive.Config{Initial: 1, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Config{SweepInterval: -1})
	defer store.Close()
	limit := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Hour}
	release := make(chan struct{})
	entered := make(chan struct{})
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: store},
		Policies: []httplimit.Policy{{Name: "rate", Limit: limit, Key: httplimit.Global()}},
		Adaptive: []httplimit.AdaptivePolicy{{Name: "shed", Limiter: lim}},
	})
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	go do(h, httptest.NewRequest(http.MethodGet, "/", nil))
	<-entered
	w := do(h, httptest.NewRequest(http.MethodGet, "/", nil))
	close(release)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("second request: %d, Retry-After %q; want 503 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	if w.Header().Get("RateLimit") != "" {
		t.Errorf("a shed request carries RateLimit %q", w.Header().Get("RateLimit"))
	}
	res, err := store.AllowN(t.Context(), "rate:*", limit, 1)
	if err != nil {
		t.Fatal(err)
	}
	if res.Remaining != 8 {
		t.Errorf("rate limit remaining %d after one more unit, want 8: the shed request's unit given back", res.Remaining)
	}
}

func TestPriorityFromHeaderAndMethod(t *testing.T) {
	byHeader := httplimit.PriorityFromHeader("x-prio", adaptive.Default)
	byMethod := httplimit.PriorityByMethod(map[string]adaptive.Priority{"GET": adaptive.Sheddable, "POST": adaptive.Critical}, adaptive.Default)
	for _, c := range []struct {
		method, header string
		fromHeader     adaptive.Priority
		fromMethod     adaptive.Priority
	}{
		{"GET", "critical", adaptive.Critical, adaptive.Sheddable},
		{"POST", "sheddable", adaptive.Sheddable, adaptive.Critical},
		{"PUT", "CRITICAL", adaptive.Default, adaptive.Default},
		{"get", "", adaptive.Default, adaptive.Default},
	} {
		r := httptest.NewRequest(c.method, "/", nil)
		if c.header != "" {
			r.Header.Set("X-Prio", c.header)
		}
		if got := byHeader(r); got != c.fromHeader {
			t.Errorf("header %q: %v, want %v", c.header, got, c.fromHeader)
		}
		if got := byMethod(r); got != c.fromMethod {
			t.Errorf("method %q: %v, want %v", c.method, got, c.fromMethod)
		}
	}
}

// A handler that panics frees its place under the adaptive limit, so the
// next request is admitted.
func TestAdaptivePanicFreesTheSlot(t *testing.T) {
	lim, err := adaptive.New(adaptive.Config{Initial: 1, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, httplimit.Config{Adaptive: []httplimit.AdaptivePolicy{{Name: "shed", Limiter: lim}}})
	panics := true
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if panics {
			panic("boom")
		}
	}))
	func() {
		defer func() { recover() }()
		do(h, httptest.NewRequest(http.MethodGet, "/", nil))
	}()
	panics = false
	if w := do(h, httptest.NewRequest(http.MethodGet, "/", nil)); w.Code != http.StatusOK {
		t.Fatalf("after a panic: %d, want 200 (the slot freed)", w.Code)
	}
	if n := lim.Stats().InFlight; n != 0 {
		t.Errorf("%d in flight after both requests, want 0", n)
	}
}

// The latency sample ends when the response's header is written, not when
// its body is: a handler that answers at once and then streams its body
// for 100 ms (a client reading slowly) keeps the limit, where one that
// takes 100 ms before its header makes it fall.
func TestAdaptiveLatencyEndsAtTheResponseHeader(t *testing.T) {
	for _, c := range []struct {
		name       string
		headerLate bool
		wantFall   bool
	}{{"body slow", false, false}, {"header slow", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := adaptive.New(adaptive.Config{
					Algorithm: adaptive.AIMD{Timeout: 50 * time.Millisecond},
					Initial:   20, Max: 20, Window: 100 * time.Millisecond, MinSamples: 1,
				})
				if err != nil {
					t.Fatal(err)
				}
				m := mustNew(t, httplimit.Config{Adaptive: []httplimit.AdaptivePolicy{{Name: "a", Limiter: lim}}})
				h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if c.headerLate {
						time.Sleep(100 * time.Millisecond)
					}
					w.WriteHeader(http.StatusOK)
					if !c.headerLate {
						time.Sleep(100 * time.Millisecond)
					}
					w.Write([]byte("done"))
				}))
				for range 20 {
					do(h, httptest.NewRequest(http.MethodGet, "/", nil))
				}
				if fell := lim.Limit() < 20; fell != c.wantFall {
					t.Errorf("limit %d after 20 requests; want it fallen: %v", lim.Limit(), c.wantFall)
				}
			})
		})
	}
}
