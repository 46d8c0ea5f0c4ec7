package failsafe_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
)

// funcPrimary is a store whose every decision is the function's answer
// to the call's context.
type funcPrimary func(ctx context.Context) (sluice.Result, error)

func (f funcPrimary) AllowN(ctx context.Context, _ string, _ sluice.Limit, _ int) (sluice.Result, error) {
	return f(ctx)
}

// funcLimiter is an Open Limiter over f with a 50ms Timeout.
func funcLimiter(t *testing.T, f funcPrimary) *failsafe.Limiter {
	t.Helper()
	l, err := failsafe.New(failsafe.Config{Primary: f, Mode: failsafe.Open, Timeout: 50 * time.Millisecond,
		Threshold: 100, Logger: slog.New(&logs{})})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A decision on a store that answers allocates nothing in the breaker:
// the store call's bounded context is reused from one decision to the
// next, under a caller's deadline too (as gRPC's are).
func TestClosedBreakerDecisionsAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random; run without -race")
	}
	l, err := failsafe.New(failsafe.Config{Primary: &primary{}, Mode: failsafe.Closed, Timeout: time.Second, Logger: slog.New(&logs{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	l.AllowN(ctx, "k", lim, 1)
	if n := testing.AllocsPerRun(100, func() { l.AllowN(ctx, "k", lim, 1) }); n != 0 {
		t.Errorf("%v allocations per decision with the breaker closed, want 0", n)
	}
}

type ctxKey struct{}

// The store's context is the caller's, with the caller's values, bounded
// as context.WithDeadline would: it ends at the bound with
// DeadlineExceeded (its Cause too), a context the store derives from it
// ends with it, and it ends as soon as the caller's does.
func TestStoreContextEndsAtTheBoundOrWithTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var value any
		var cause error
		l := funcLimiter(t, func(ctx context.Context) (sluice.Result, error) {
			value = ctx.Value(ctxKey{})
			derived, cancel := context.WithCancel(ctx)
			defer cancel()
			<-derived.Done()
			cause = context.Cause(ctx)
			return sluice.Result{}, ctx.Err()
		})
		ctx := context.WithValue(t.Context(), ctxKey{}, "v")
		start := time.Now()
		_, fellBack, err := l.Decide(ctx, "k", lim, 1)
		if d := time.Since(start); d != 50*time.Millisecond || !fellBack || err != nil {
			t.Errorf("hung store: %v, fellBack %v, %v; want 50ms, the Open answer", d, fellBack, err)
		}
		if value != "v" || !errors.Is(cause, context.DeadlineExceeded) {
			t.Errorf("store saw value %v, cause %v; want v, DeadlineExceeded", value, cause)
		}

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Millisecond, cancel)
		start = time.Now()
		_, fellBack, err = l.Decide(ctx, "k", lim, 1)
		if d := time.Since(start); d != time.Millisecond || fellBack || !errors.Is(err, context.Canceled) {
			t.Errorf("caller cancelled after 1ms: %v, fellBack %v, %v; want 1ms, context.Canceled", d, fellBack, err)
		}
	})
}

// A call whose context ended (its bound passed, its caller gave up) never
// lends that context to a later call: every call starts with a live one,
// whose deadline is its own.
func TestEndedStoreContextIsNotReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := true
		var live []bool
		var deadlines []time.Duration
		l := funcLimiter(t, func(ctx context.Context) (sluice.Result, error) {
			live = append(live, ctx.Err() == nil)
			dl, _ := ctx.Deadline()
			deadlines = append(deadlines, time.Until(dl))
			if hang {
				<-ctx.Done()
				return sluice.Result{}, ctx.Err()
			}
			return sluice.Result{Allowed: true}, nil
		})
		for i := range 6 {
			hang = i%2 == 0
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(10+i)*time.Millisecond)
			l.Decide(ctx, "k", lim, 1)
			cancel()
			time.Sleep(time.Second) // apart, so that a stale timer would have fired
		}
		for i := range live {
			want := time.Duration(10+i) * time.Millisecond / 10 * 9
			if !live[i] || deadlines[i] != want {
				t.Errorf("call %d: context live %v, deadline in %v; want live, in %v", i, live[i], deadlines[i], want)
			}
		}
	})
}

// A store that registers context.AfterFunc on its call's context (pgx does,
// for every query, to cancel it) has it run when the bound passes and when
// the caller cancels, not when it stopped it in time; one still registered
// when the call returns runs then, as with the context package's
// contexts.
func TestStoreAfterFuncRunsWhenTheCallEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran []time.Duration
		start := time.Now()
		record := func() { ran = append(ran, time.Since(start)) }
		hang, stopIt := true, false
		l := funcLimiter(t, func(ctx context.Context) (sluice.Result, error) {
			stop := context.AfterFunc(ctx, record)
			if stopIt {
				stop()
			}
			if hang {
				<-ctx.Done()
				return sluice.Result{}, ctx.Err()
			}
			return sluice.Result{Allowed: true}, nil
		})
		check := func(what string, want ...time.Duration) {
			t.Helper()
			synctest.Wait()
			if !slices.Equal(ran, want) {
				t.Errorf("%s: AfterFunc ran at %v, want %v", what, ran, want)
			}
			ran, start = nil, time.Now()
		}
		l.Decide(t.Context(), "k", lim, 1)
		check("hung store", 50*time.Millisecond)

		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(3*time.Millisecond, cancel)
		l.Decide(ctx, "k", lim, 1)
		check("caller cancelled", 3*time.Millisecond)

		hang = false
		l.Decide(t.Context(), "k", lim, 1)
		check("still registered when the call returned", 0)

		stopIt = true
		for range 3 {
			l.Decide(t.Context(), "k", lim, 1)
		}
		time.Sleep(time.Second)
		check("stopped in time")
	})
}
