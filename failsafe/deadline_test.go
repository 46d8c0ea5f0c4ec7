package failsafe_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/memstore"
)

// warnings records the failsafe warning lines' errors_total and last_error.
type warnings struct {
	mu          sync.Mutex
	errorsTotal []int64
	lastError   []string
}

func (h *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (h *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "errors_total":
			h.errorsTotal = append(h.errorsTotal, a.Value.Int64())
		case "last_error":
			h.lastError = append(h.lastError, a.Value.String())
		}
		return true
	})
	return nil
}
func (h *warnings) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnings) WithGroup(string) slog.Handler      { return h }

// hungLimiter returns a Limiter of mode m (default Timeout, 50ms) over a
// primary, able to peek, that hangs until its context ends.
func hungLimiter(t *testing.T, m failsafe.Mode, h slog.Handler) (*failsafe.Limiter, *primary) {
	t.Helper()
	p := downPrimary()
	p.block = true
	local := memstore.New(memstore.Config{SweepInterval: -1})
	t.Cleanup(func() { local.Close() })
	l, err := failsafe.New(failsafe.Config{
		Primary: peekPrimary{p}, Mode: m, Local: local, Nodes: 2,
		Threshold: 3, Backoff: time.Second, Logger: slog.New(h), LogInterval: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, p
}

// TestHungStoreTripsBreakerUnderShortCallerDeadline: behind Envoy, whose
// 20ms deadline is shorter than the 50ms Timeout, a store that never
// answers is a failing store: every call falls back to the mode's answer
// before the caller's deadline, is counted and logged as a store error,
// and Threshold of them open the breaker, after which the store is not
// called and the mode answers at once. Decisions and peeks alike.
func TestHungStoreTripsBreakerUnderShortCallerDeadline(t *testing.T) {
	const envoy = 20 * time.Millisecond
	for _, m := range []failsafe.Mode{failsafe.Closed, failsafe.Local} {
		for _, op := range []string{"decide", "peek"} {
			t.Run(m.String()+"/"+op, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					h := &warnings{}
					l, p := hungLimiter(t, m, h)
					for i := range 4 { // 3 failures open the breaker; the 4th call skips the store
						ctx, cancel := context.WithTimeout(t.Context(), envoy)
						start := time.Now()
						var (
							res      sluice.Result
							fellBack bool
							err      error
						)
						if op == "peek" {
							res, fellBack, err = l.DecidePeek(ctx, "k", lim)
						} else {
							res, fellBack, err = l.Decide(ctx, "k", lim, 1)
						}
						took, late := time.Since(start), ctx.Err()
						cancel()
						if !fellBack {
							t.Errorf("call %d: %+v, %v, fellBack false; want the %v mode's answer", i, res, err, m)
							continue
						}
						switch m {
						case failsafe.Closed:
							if !errors.Is(err, failsafe.ErrUnavailable) || res.Allowed {
								t.Fatalf("call %d: %+v, %v; want a denial wrapping ErrUnavailable", i, res, err)
							}
						case failsafe.Local:
							if err != nil || !res.Allowed {
								t.Fatalf("call %d: %+v, %v; want the local store's admission", i, res, err)
							}
						}
						if late != nil {
							t.Errorf("call %d answered after the caller's %v deadline (took %v)", i, envoy, took)
						}
						if i == 3 && took != 0 {
							t.Errorf("call %d, breaker open, took %v; want an answer at once", i, took)
						}
					}
					if n := p.calls.Load(); n != 3 {
						t.Errorf("store called %d times, want 3 (the breaker opens after 3 timeouts)", n)
					}
					if l.Available() {
						t.Error("breaker closed after 3 calls the store never answered")
					}
					h.mu.Lock()
					defer h.mu.Unlock()
					if len(h.errorsTotal) != 1 || h.errorsTotal[0] != 1 || len(h.lastError) != 1 {
						t.Errorf("warning lines: errors_total %v, last_error %q; want one line, errors_total 1", h.errorsTotal, h.lastError)
					}
				})
			})
		}
	}
}

// TestCallerCancelTripsNothing: a caller that cancels while the store
// hangs gave up; that says nothing about the store: the call returns
// context.Canceled, no fallback, and the breaker stays closed.
func TestCallerCancelTripsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, p := hungLimiter(t, failsafe.Closed, &warnings{})
		for i := range 5 {
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(time.Millisecond, cancel)
			var (
				fellBack bool
				err      error
			)
			if i%2 == 0 {
				_, fellBack, err = l.Decide(ctx, "k", lim, 1)
			} else {
				_, fellBack, err = l.DecidePeek(ctx, "k", lim)
			}
			cancel()
			if !errors.Is(err, context.Canceled) || fellBack {
				t.Fatalf("call %d: fellBack %v, %v; want context.Canceled and no fallback", i, fellBack, err)
			}
		}
		if !l.Available() || p.calls.Load() != 5 {
			t.Errorf("after 5 cancelled calls: breaker available %v, store calls %d; want closed, 5", l.Available(), p.calls.Load())
		}
	})
}

// TestDeadlineTooShortToJudgeTripsNothing: a caller whose deadline leaves
// the store less than a tenth of Timeout (hostile, or already late) cannot
// open the breaker for everyone: its call ends with the deadline's error,
// not the mode's answer, and the breaker stays closed.
func TestDeadlineTooShortToJudgeTripsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := hungLimiter(t, failsafe.Closed, &warnings{})
		for i, d := range []time.Duration{-time.Second, 0, time.Microsecond, time.Millisecond, 5 * time.Millisecond} {
			ctx, cancel := context.WithTimeout(t.Context(), d)
			_, fellBack, err := l.Decide(ctx, "k", lim, 1)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || fellBack {
				t.Fatalf("call %d, deadline %v: fellBack %v, %v; want context.DeadlineExceeded and no fallback", i, d, fellBack, err)
			}
		}
		if !l.Available() {
			t.Error("deadlines too short to judge the store opened the breaker")
		}
	})
}
