package httplimit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/queue"
)

// waits records the delays a Middleware asks for, without waiting. The
// Middleware calls it in the goroutine that serves the request, here the
// test's own.
type waits struct{ ds []time.Duration }

func (w *waits) wait(_ context.Context, d time.Duration) error {
	w.ds = append(w.ds, d)
	return nil
}

// NGINX cases 56–58 of the conformance list, through the middleware: seven
// requests at one instant under rate=1r/s burst=5, with delays on, nodelay
// and delay=3.
func TestQueueNGINX(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		cfg    queue.Config
		delays []time.Duration // of the admitted requests, in order
	}{
		{"burst=5", queue.Config{Rate: 1, Period: time.Second, Burst: 5},
			[]time.Duration{0, 1000 * ms, 2000 * ms, 3000 * ms, 4000 * ms, 5000 * ms}},
		{"burst=5 nodelay", queue.Config{Rate: 1, Period: time.Second, Burst: 5, NoDelay: true},
			[]time.Duration{0, 0, 0, 0, 0, 0}},
		{"burst=5 delay=3", queue.Config{Rate: 1, Period: time.Second, Burst: 5, Delay: 3},
			[]time.Duration{0, 0, 0, 0, 1000 * ms, 2000 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.New()
			var w waits
			var served int
			qc := tc.cfg
			m := mustNew(t, httplimit.Config{
				Settings: httplimit.Settings{Limiter: newStore(t, clock), StatusCode: http.StatusServiceUnavailable, Wait: w.wait},
				Policies: []httplimit.Policy{{Name: "q", Queue: &qc, Key: httplimit.Global()}},
			})
			h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
			var codes []int
			for range 7 {
				before := len(w.ds)
				rec := do(h, httptest.NewRequest("GET", "/", nil))
				codes = append(codes, rec.Code)
				if len(w.ds) == before && rec.Code == http.StatusOK {
					w.ds = append(w.ds, 0) // not asked to wait
				}
			}
			want := []int{200, 200, 200, 200, 200, 200, 503}
			if !slices.Equal(codes, want) {
				t.Fatalf("codes %v, want %v", codes, want)
			}
			if served != 6 {
				t.Errorf("handler served %d, want 6", served)
			}
			if !slices.Equal(w.ds, tc.delays) {
				t.Fatalf("delays %v, want %v", w.ds, tc.delays)
			}
		})
	}
}

// A request whose client leaves while it waits gives its place back and
// never reaches the handler.
func TestQueueCancelGivesBack(t *testing.T) {
	clock := clocktest.New()
	qc := queue.Config{Rate: 1, Period: time.Second, Burst: 1}
	var served int
	lim := newStore(t, clock)
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: lim, Wait: func(ctx context.Context, d time.Duration) error {
			return context.Canceled // the client hung up while queued
		}},
		Policies: []httplimit.Policy{{Name: "q", Queue: &qc, Key: httplimit.Global()}},
	})
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	if c := do(h, httptest.NewRequest("GET", "/", nil)).Code; c != 200 {
		t.Fatalf("first: %d", c)
	}
	// The second waits 1 s and is cancelled: its place must come back, so a
	// third is admitted (to wait, and be cancelled too) rather than refused.
	for i := range 3 {
		rec := do(h, httptest.NewRequest("GET", "/", nil))
		if rec.Code != http.StatusOK || rec.Body.Len() != 0 {
			t.Fatalf("queued request %d: %d %q, want nothing written", i, rec.Code, rec.Body)
		}
	}
	if served != 1 {
		t.Fatalf("served %d, want 1: a cancelled request reached the handler", served)
	}
	// Without the refunds the bucket would be full after the second
	// request: this one, at the same instant, would be refused.
	m2 := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: lim, Wait: func(context.Context, time.Duration) error { return nil }},
		Policies: []httplimit.Policy{{Name: "q", Queue: &qc, Key: httplimit.Global()}},
	})
	if c := do(m2.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil)).Code; c != http.StatusOK {
		t.Fatalf("after three cancelled waits: %d, want 200 (their places given back)", c)
	}
}

// With the default Wait, a cancelled context ends the wait at once.
func TestQueueRealWaitCancelled(t *testing.T) {
	qc := queue.Config{Rate: 1, Period: time.Minute, Burst: 1}
	lim := newStore(t, nil)
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: lim},
		Policies: []httplimit.Policy{{Name: "q", Queue: &qc, Key: httplimit.Global()}},
	})
	var served int
	h := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	do(h, httptest.NewRequest("GET", "/", nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		do(h, httptest.NewRequest("GET", "/", nil).WithContext(ctx)) // waits a minute
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled request kept waiting")
	}
	if served != 1 {
		t.Fatalf("served %d, want 1", served)
	}
	// Its place was given back: the bucket holds the first request only, so
	// one more fits (burst=1) before a refusal.
	res, err := lim.AllowN(context.Background(), "q:global", qLimit(t, qc), 1)
	if err != nil || !res.Allowed {
		t.Fatalf("after the cancel: %+v %v, want admitted", res, err)
	}
}

// Several queued policies: the request waits the longest delay; if one
// refuses, none is charged.
func TestQueueSeveral(t *testing.T) {
	clock := clocktest.New()
	slow := queue.Config{Rate: 1, Period: time.Second, Burst: 3}
	fast := queue.Config{Rate: 2, Period: time.Second, Burst: 1}
	var w waits
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clock), Wait: w.wait},
		Policies: []httplimit.Policy{
			{Name: "slow", Queue: &slow, Key: httplimit.Global()},
			{Name: "fast", Queue: &fast, Key: httplimit.Global()},
		},
	})
	h := m.Handler(http.HandlerFunc(ok))
	var codes []int
	for range 3 {
		codes = append(codes, do(h, httptest.NewRequest("GET", "/", nil)).Code)
	}
	// slow admits 4 (waits 0,1,2,3 s), fast 2 (waits 0, 0.5 s): the second
	// request waits max(1 s, 0.5 s); the third is refused by fast, and slow
	// is given back its unit.
	if !slices.Equal(codes, []int{200, 200, 429}) {
		t.Fatalf("codes %v", codes)
	}
	if len(w.ds) != 1 || w.ds[0] != time.Second {
		t.Fatalf("waits %v, want [1s]", w.ds)
	}
	clock.Advance(time.Second) // slow drains to 1 waiting, fast to 0
	w.ds = nil
	if c := do(h, httptest.NewRequest("GET", "/", nil)).Code; c != 200 {
		t.Fatalf("after 1s: %d", c)
	}
	// Had slow been charged for the refused request, it would ask 2 s.
	if len(w.ds) != 1 || w.ds[0] != time.Second {
		t.Fatalf("waits %v, want [1s]", w.ds)
	}
}

func TestQueueConfigErrors(t *testing.T) {
	lim := newStore(t, nil)
	for name, p := range map[string]httplimit.Policy{
		"both":        {Name: "p", Limit: sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1, Period: time.Second}, Queue: &queue.Config{Rate: 1, Period: time.Second}, Key: httplimit.Global()},
		"no rate":     {Name: "p", Queue: &queue.Config{Period: time.Second}, Key: httplimit.Global()},
		"delay>burst": {Name: "p", Queue: &queue.Config{Rate: 1, Period: time.Second, Burst: 1, Delay: 2}, Key: httplimit.Global()},
	} {
		_, err := httplimit.New(httplimit.Config{Settings: httplimit.Settings{Limiter: lim, Logger: quiet}, Policies: []httplimit.Policy{p}})
		if err == nil {
			t.Errorf("%s: no error", name)
		} else if name != "both" && !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Errorf("%s: %v does not wrap ErrInvalidLimit", name, err)
		}
	}
	if _, err := httplimit.New(httplimit.Config{Settings: httplimit.Settings{Limiter: lim, ConcurrencyStatusCode: 600}, Concurrency: []httplimit.ConcurrencyPolicy{{Name: "c", Max: 1}}}); err == nil {
		t.Error("concurrency status 600 accepted")
	}
}

// A ConcurrencyPolicy answers with ConcurrencyStatusCode, and in Shadow
// mode refuses nothing.
func TestConcurrencyStatusAndShadow(t *testing.T) {
	for _, shadow := range []bool{false, true} {
		m := mustNew(t, httplimit.Config{
			Concurrency: []httplimit.ConcurrencyPolicy{{Name: "c", Max: 1, Shadow: shadow}},
			Settings:    httplimit.Settings{ConcurrencyStatusCode: http.StatusServiceUnavailable, Logger: quiet},
		})
		hold, entered, release := holding()
		h := m.Handler(hold)
		go do(h, httptest.NewRequest("GET", "/hold", nil))
		<-entered
		code := do(h, httptest.NewRequest("GET", "/", nil)).Code
		close(release)
		want := http.StatusServiceUnavailable
		if shadow {
			want = http.StatusOK
		}
		if code != want {
			t.Errorf("shadow=%v: second in flight got %d, want %d", shadow, code, want)
		}
	}
}

func qLimit(t *testing.T, c queue.Config) sluice.Limit {
	q, err := queue.New(newStore(t, nil), c)
	if err != nil {
		t.Fatal(err)
	}
	return q.Limit()
}
