package failsafe_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
)

// reuseCall is what one caller of the stress test below puts in its
// context's values: the context itself, so that the store can tell
// whether its call's context ended for its own caller.
type reuseCall struct{ parent context.Context }

// reuseStore is a store that, while its call lasts, holds its call's
// context to being its own caller's: the same value and deadline from
// the start of the call to its end, and an end (Done, Err) only at its
// own deadline or with its own caller. It waits in the ways stores do:
// not at all, on Done, on a derived context, with an AfterFunc it stops,
// polling Err, each for a random short time.
func reuseStore(t *testing.T) funcPrimary {
	return func(ctx context.Context) (sluice.Result, error) {
		rc, _ := ctx.Value(ctxKey{}).(*reuseCall)
		dl, ok := ctx.Deadline()
		if rc == nil || !ok {
			t.Errorf("store call without its caller's value (%v) or a deadline (%v)", rc, ok)
			return sluice.Result{}, nil
		}
		check := func(when string) {
			if got, _ := ctx.Value(ctxKey{}).(*reuseCall); got != rc {
				t.Errorf("%s: the call's context answers another caller's value", when)
			}
			if got, _ := ctx.Deadline(); !got.Equal(dl) {
				t.Errorf("%s: the call's deadline moved from %v to %v", when, dl, got)
			}
			if err := ctx.Err(); err != nil && rc.parent.Err() == nil && time.Now().Before(dl) {
				t.Errorf("%s: the call's context ended (%v) before its deadline, its caller live", when, err)
			}
		}
		check("at the start")
		wait := time.Duration(rand.IntN(300)) * time.Microsecond
		switch rand.IntN(5) {
		case 1:
			waitDone(ctx, wait)
		case 2:
			vctx := context.WithValue(ctx, struct{ derived int }{}, 1) // not the context package's own kind
			derived, cancel := context.WithTimeout(vctx, wait)
			<-derived.Done()
			cancel()
		case 3:
			stop := context.AfterFunc(ctx, func() {})
			waitDone(ctx, wait)
			stop()
		case 4:
			for end := time.Now().Add(wait); ctx.Err() == nil && time.Now().Before(end); {
				check("polling")
			}
		}
		check("at the return")
		return sluice.Result{Allowed: true}, ctx.Err()
	}
}

// waitDone waits until ctx ends or d passes.
func waitDone(ctx context.Context, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
	case <-timer.C:
	}
}

// Many callers at once, each with its own deadline or cancellation at a
// random moment, share the Group's reused store-call contexts: a store
// never sees, during its call, a context that answers for another caller
// (its values, its deadline, its end).
func TestReusedStoreContextIsOnlyItsCallersWhileTheCallLasts(t *testing.T) {
	l, err := failsafe.New(failsafe.Config{Primary: reuseStore(t), Mode: failsafe.Open,
		Timeout: 200 * time.Microsecond, Threshold: 1 << 30, Logger: slog.New(&logs{})})
	if err != nil {
		t.Fatal(err)
	}
	calls := 200
	if testing.Short() {
		calls = 20
	}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range calls {
				reuseCaller(l)
			}
		})
	}
	wg.Wait()
}

// reuseCaller makes one decision on l with a context that has a random
// deadline, is cancelled at a random moment, or neither.
func reuseCaller(l *failsafe.Limiter) {
	var parent context.Context
	var cancel context.CancelFunc
	d := time.Duration(rand.IntN(400)) * time.Microsecond
	switch rand.IntN(3) {
	case 0:
		parent, cancel = context.WithTimeout(context.Background(), d)
	case 1:
		parent, cancel = context.WithCancel(context.Background())
		defer time.AfterFunc(d, cancel).Stop()
	default:
		parent, cancel = context.WithCancel(context.Background())
	}
	defer cancel()
	rc := &reuseCall{}
	rc.parent = context.WithValue(parent, ctxKey{}, rc)
	l.Decide(rc.parent, "k", lim, 1)
}

// A store that answers exactly at its call's deadline, as the bound's
// timer fires, leaves the next call a live context with a deadline of
// its own, which ends only at that deadline.
func TestCallAnsweredAtItsDeadlineLeavesTheNextCallItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var errs []error
		l := funcLimiter(t, func(ctx context.Context) (sluice.Result, error) {
			dl, _ := ctx.Deadline()
			if time.Until(dl) != 50*time.Millisecond {
				t.Errorf("call starts with its deadline in %v, want 50ms", time.Until(dl))
			}
			errs = append(errs, ctx.Err())
			time.Sleep(time.Until(dl)) // answers as the bound's timer fires
			return sluice.Result{Allowed: true}, nil
		})
		for range 20 {
			l.Decide(t.Context(), "k", lim, 1)
			time.Sleep(time.Millisecond)
		}
		for i, err := range errs {
			if err != nil {
				t.Errorf("call %d started with an ended context: %v", i, err)
			}
		}
	})
}
