package failsafe_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(redistest.Wrap(m)) }

// primary is a store that fails while down is set, and counts its calls.
type primary struct {
	down  atomic.Bool
	calls atomic.Int64
	block bool // when down, block until the context ends instead of failing at once
}

var errDown = errors.New("connection refused")

// downPrimary returns a primary that is down.
func downPrimary() *primary {
	p := &primary{}
	p.down.Store(true)
	return p
}

func (p *primary) AllowN(ctx context.Context, key string, lim sluice.Limit, cost int) (sluice.Result, error) {
	p.calls.Add(1)
	if err := sluice.Check(key, lim, cost); err != nil {
		return sluice.Result{}, err
	}
	if p.down.Load() {
		if p.block {
			<-ctx.Done()
			return sluice.Result{}, ctx.Err()
		}
		return sluice.Result{}, errDown
	}
	return sluice.Result{Allowed: true, Remaining: 41}, nil
}

// logs counts the records a logger receives.
type logs struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logs) Enabled(context.Context, slog.Level) bool { return true }
func (h *logs) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *logs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logs) WithGroup(string) slog.Handler      { return h }
func (h *logs) count(substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, substr) {
			n++
		}
	}
	return n
}

var lim = sluice.PerSecond(10)

// everyMode is every Mode, for the tests that hold each to the same
// behaviour.
var everyMode = []failsafe.Mode{failsafe.Open, failsafe.Closed, failsafe.Local}

// newLimiter is a failsafe Limiter in mode over p, with an in-memory local
// limiter for 2 nodes and a breaker that opens after 3 failures and backs
// off from 1 s to 4 s.
func newLimiter(t *testing.T, mode failsafe.Mode, p sluice.Limiter, clock sluice.Clock, h *logs) *failsafe.Limiter {
	t.Helper()
	local := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { local.Close() })
	l, err := failsafe.New(failsafe.Config{
		Primary: p, Mode: mode, Local: local, Nodes: 2,
		Threshold: 3, Backoff: time.Second, MaxBackoff: 4 * time.Second,
		Logger: slog.New(h), LogInterval: 10 * time.Second, Clock: clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestModes(t *testing.T) {
	ctx := context.Background()
	t.Run("open admits", func(t *testing.T) {
		l := newLimiter(t, failsafe.Open, downPrimary(), clocktest.New(), &logs{})
		for i := range 20 {
			r, err := l.Allow(ctx, "k", lim)
			if err != nil || !r.Allowed {
				t.Fatalf("request %d: %+v, %v; want admitted, no error", i, r, err)
			}
		}
	})
	t.Run("closed denies with a distinct error", func(t *testing.T) {
		l := newLimiter(t, failsafe.Closed, downPrimary(), clocktest.New(), &logs{})
		r, err := l.Allow(ctx, "k", lim)
		if !errors.Is(err, failsafe.ErrUnavailable) || !errors.Is(err, errDown) {
			t.Fatalf("error %v, want one wrapping ErrUnavailable and the cause", err)
		}
		if r.Allowed || r.RetryAfter <= 0 {
			t.Fatalf("result %+v, want denied with a RetryAfter", r)
		}
	})
	t.Run("local enforces a share", func(t *testing.T) {
		l := newLimiter(t, failsafe.Local, downPrimary(), clocktest.New(), &logs{})
		admitted := storetest.CountAllowed(t, 20, func() (sluice.Result, error) { return l.Allow(ctx, "k", lim) })
		// 10/s split over 2 nodes: a burst of 5 locally.
		if admitted != 5 {
			t.Fatalf("local fallback admitted %d of 20, want 5 (10 ÷ 2 nodes)", admitted)
		}
	})
}

// The breaker stops calling a failing primary, probes it after the back-off
// (which doubles while probes fail), and goes back to it by itself.
func TestBreakerBacksOffAndRecoversByItself(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	p := &primary{}
	h := &logs{}
	l := newLimiter(t, failsafe.Open, p, clock, h)

	p.down.Store(true)
	for range 10 {
		l.Allow(ctx, "k", lim)
	}
	if got := p.calls.Load(); got != 3 {
		t.Fatalf("primary called %d times for 10 requests, want 3 (the threshold)", got)
	}
	if l.Available() {
		t.Fatal("breaker closed after 3 failures")
	}
	clock.Advance(999 * time.Millisecond)
	l.Allow(ctx, "k", lim)
	if got := p.calls.Load(); got != 3 {
		t.Fatalf("primary called during the back-off: %d calls", got)
	}
	clock.Advance(time.Millisecond) // back-off over: one probe, which fails
	l.Allow(ctx, "k", lim)
	l.Allow(ctx, "k", lim)
	if got := p.calls.Load(); got != 4 {
		t.Fatalf("after the back-off: %d calls, want 4 (one probe)", got)
	}
	clock.Advance(1999 * time.Millisecond) // the back-off doubled to 2s
	l.Allow(ctx, "k", lim)
	if got := p.calls.Load(); got != 4 {
		t.Fatalf("probe before the doubled back-off ended: %d calls", got)
	}
	p.down.Store(false)
	clock.Advance(time.Millisecond)
	r, err := l.Allow(ctx, "k", lim)
	if err != nil || r.Remaining != 41 {
		t.Fatalf("probe after recovery: %+v, %v; want the primary's answer", r, err)
	}
	if !l.Available() {
		t.Fatal("breaker still open after a successful probe")
	}
	for range 5 {
		l.Allow(ctx, "k", lim)
	}
	if got := p.calls.Load(); got != 10 {
		t.Fatalf("after recovery: %d calls, want 10", got)
	}
	if n := h.count("failing"); n != 1 {
		t.Errorf("%d error log lines within one interval, want 1", n)
	}
	if n := h.count("back"); n != 1 {
		t.Errorf("%d recovery log lines, want 1", n)
	}
}

// hanging returns an Open Limiter with a 50ms timeout on a primary that
// hangs until its context ends.
func hanging(t *testing.T) *failsafe.Limiter {
	t.Helper()
	p := downPrimary()
	p.block = true
	l, err := failsafe.New(failsafe.Config{Primary: p, Mode: failsafe.Open, Timeout: 50 * time.Millisecond, Logger: slog.New(&logs{})})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A primary that hangs costs at most the timeout.
func TestHungPrimaryCostsAtMostTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := hanging(t)
		start := time.Now()
		r, err := l.Allow(context.Background(), "k", lim)
		if err != nil || !r.Allowed {
			t.Fatalf("%+v, %v; want admitted", r, err)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Fatalf("a hanging primary cost %v, want the 50ms timeout", d)
		}
	})
}

// The per-call timeout and the caller's deadline: whichever comes first
// ends a hanging call (the caller's leaving a tenth of its time for the
// mode's answer), and the store failed, unless the caller's deadline left
// it less than a tenth of the timeout.
func TestCallerDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // the caller's; 0: none
		want     time.Duration // what a hanging primary costs
		gaveUp   bool          // too short to judge the store: an error, no fallback
	}{
		{"no deadline", 0, 50 * time.Millisecond, false},
		{"later deadline", time.Second, 50 * time.Millisecond, false},
		{"same deadline", 50 * time.Millisecond, 45 * time.Millisecond, false},
		{"earlier deadline", 10 * time.Millisecond, 9 * time.Millisecond, false},
		{"deadline too short to judge", 5 * time.Millisecond, 4500 * time.Microsecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := hanging(t)
				ctx := context.Background()
				if tc.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					defer cancel()
				}
				start := time.Now()
				r, err := l.Allow(ctx, "k", lim)
				if d := time.Since(start); d != tc.want {
					t.Errorf("a hanging primary cost %v, want %v", d, tc.want)
				}
				switch {
				case tc.gaveUp && !errors.Is(err, context.DeadlineExceeded):
					t.Errorf("%+v, %v; want context.DeadlineExceeded", r, err)
				case !tc.gaveUp && (err != nil || !r.Allowed):
					t.Errorf("%+v, %v; want admitted (mode open)", r, err)
				}
			})
		})
	}
}

// Bad input is the caller's error: returned as is, and it trips nothing.
func TestBadInputPassesThrough(t *testing.T) {
	p := &primary{}
	l := newLimiter(t, failsafe.Closed, p, clocktest.New(), &logs{})
	for range 10 {
		_, err := l.AllowN(context.Background(), "", lim, 1)
		if !errors.Is(err, sluice.ErrInvalidKey) || errors.Is(err, failsafe.ErrUnavailable) {
			t.Fatalf("error %v, want ErrInvalidKey alone", err)
		}
	}
	if !l.Available() {
		t.Fatal("bad input opened the breaker")
	}
}

func TestConfig(t *testing.T) {
	if _, err := failsafe.New(failsafe.Config{}); err == nil {
		t.Error("no primary: no error")
	}
	if _, err := failsafe.New(failsafe.Config{Primary: &primary{}, Mode: failsafe.Local}); err == nil {
		t.Error("Local mode without a local limiter: no error")
	}
	for _, s := range []string{"open", "closed", "local"} {
		m, err := failsafe.ParseMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := failsafe.ParseMode("sometimes"); err == nil {
		t.Error(`ParseMode("sometimes"): no error`)
	}
	if got := failsafe.Split(sluice.PerSecond(10).WithBurst(3), 4); got.Rate != 2 || got.Burst != 1 {
		t.Errorf("Split(10/s burst 3, 4) = %v, want 2/s burst 1", got)
	}
}

// flaky fails every tenth call.
type flaky struct{ n atomic.Int64 }

func (f *flaky) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	if f.n.Add(1)%10 == 0 {
		return sluice.Result{}, errDown
	}
	return sluice.Result{Allowed: true}, nil
}

// A store that fails now and then never opens the breaker (failures are not
// consecutive) and logs one line per interval, not one per recovery.
func TestFlakyStoreLogsOnce(t *testing.T) {
	h := &logs{}
	l, err := failsafe.New(failsafe.Config{Primary: &flaky{}, Logger: slog.New(h), Clock: clocktest.New()})
	if err != nil {
		t.Fatal(err)
	}
	for range 1000 {
		l.Allow(context.Background(), "k", lim)
	}
	if !l.Available() {
		t.Fatal("scattered failures opened the breaker")
	}
	if n := len(h.msgs); n != 1 {
		t.Fatalf("%d log lines for 100 scattered failures within one interval, want 1: %v", n, h.msgs)
	}
}

// Local mode with a share too small for the cost denies; it is not bad input.
func TestLocalShareBelowCost(t *testing.T) {
	l := newLimiter(t, failsafe.Local, downPrimary(), clocktest.New(), &logs{})
	r, err := l.AllowN(context.Background(), "k", lim, 8) // 10/s split over 2 nodes holds 5
	if err != nil || r.Allowed || r.RetryAfter <= 0 {
		t.Fatalf("cost 8 over a local share of 5: %+v, %v; want a denial", r, err)
	}
}

// With NodesNow, the local share follows the count at each decision: a
// fleet that grows from 2 to 4 servers while the store is down halves
// each server's share of a new window, and Nodes is not read.
func TestLocalShareFollowsNodesNow(t *testing.T) {
	ctx := context.Background()
	clock := clocktest.New()
	local := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { local.Close() })
	var nodes atomic.Int64
	nodes.Store(2)
	l, err := failsafe.New(failsafe.Config{Primary: downPrimary(), Mode: failsafe.Local, Local: local,
		Nodes: 100, NodesNow: func() int { return int(nodes.Load()) }, Clock: clock,
		Logger: slog.New(&logs{})})
	if err != nil {
		t.Fatal(err)
	}
	hundred := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 100, Period: time.Hour}
	admitted := func(key string) int {
		n := 0
		for range 200 {
			if r, err := l.Allow(ctx, key, hundred); err == nil && r.Allowed {
				n++
			}
		}
		return n
	}
	if got := admitted("a"); got != 50 {
		t.Fatalf("2 servers: admitted %d of 100, want 50", got)
	}
	nodes.Store(4)
	if got := admitted("b"); got != 25 {
		t.Fatalf("4 servers: admitted %d of 100, want 25", got)
	}
	nodes.Store(0)
	if got := admitted("c"); got != 100 {
		t.Fatalf("a count of 0 read as 1: admitted %d of 100, want 100", got)
	}
}
