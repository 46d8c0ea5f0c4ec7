package failsafe_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// TestGroupModesShareOneBreaker: failures seen through one mode's Limiter
// open the breaker for every mode's, each of which then answers as its
// mode says, and Decide reports the decisions made without the primary.
func TestGroupModesShareOneBreaker(t *testing.T) {
	clock := clocktest.New()
	p := downPrimary()
	local := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	t.Cleanup(func() { local.Close() })
	g, err := failsafe.NewGroup(failsafe.Config{Primary: p, Local: local, Threshold: 2, Backoff: time.Second,
		Logger: slog.New(&logs{}), Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	open, closed, loc := g.Limiter(failsafe.Open), g.Limiter(failsafe.Closed), g.Limiter(failsafe.Local)
	if g.Limiter(9) != nil || open.Mode() != failsafe.Open || loc.Mode() != failsafe.Local {
		t.Fatal("Limiter(mode) does not return that mode's Limiter")
	}
	for range 2 {
		if _, fellBack, err := open.Decide(ctx, "k", lim, 1); !fellBack || err != nil {
			t.Fatalf("open mode over a failing store: fellBack %v, err %v", fellBack, err)
		}
	}
	if g.Available() {
		t.Fatal("two failures through the Open limiter did not open the shared breaker (Threshold 2)")
	}
	calls := p.calls.Load()
	r, fellBack, err := closed.Decide(ctx, "k", lim, 1)
	if !fellBack || !errors.Is(err, failsafe.ErrUnavailable) || r.Allowed || r.RetryAfter != time.Second {
		t.Fatalf("closed mode, breaker open: %+v, %v, %v; want a denial until the probe (1s)", r, fellBack, err)
	}
	if r, _, err := loc.Decide(ctx, "k", lim, 1); err != nil || !r.Allowed {
		t.Fatalf("local mode, breaker open: %+v, %v", r, err)
	}
	if p.calls.Load() != calls {
		t.Fatal("the primary was asked while the shared breaker was open")
	}
	// The probe, through any mode, closes it for all.
	clock.Advance(time.Second)
	p.down.Store(false)
	if r, fellBack, err := closed.Decide(ctx, "k", lim, 1); fellBack || err != nil || r.Remaining != 41 {
		t.Fatalf("probe: %+v, %v, %v", r, fellBack, err)
	}
	if !g.Available() || !open.Available() {
		t.Fatal("a good probe did not close the shared breaker")
	}
	if _, err := g.Limiter(failsafe.Local).AllowN(ctx, "", lim, 1); !errors.Is(err, sluice.ErrBadInput) {
		t.Fatalf("bad input: %v", err)
	}
}

// TestLocalDenialWaitsUntilProbe: a cost over the local share is denied
// with a RetryAfter that ends at the breaker's next probe, as a Closed
// denial's does, not a whole back-off later.
func TestLocalDenialWaitsUntilProbe(t *testing.T) {
	clock := clocktest.New()
	l := newLimiter(t, failsafe.Local, downPrimary(), clock, &logs{})
	ctx := context.Background()
	for range 3 { // Threshold 3 opens the breaker for 1s
		l.AllowN(ctx, "k", lim, 1)
	}
	clock.Advance(400 * time.Millisecond)
	r, err := l.AllowN(ctx, "k", lim, 8) // 10/s split over 2 nodes holds 5
	if err != nil || r.Allowed || r.RetryAfter != 600*time.Millisecond {
		t.Fatalf("cost 8 over a share of 5, 400ms into a 1s back-off: %+v, %v; want denied, RetryAfter 600ms", r, err)
	}
}

// TestBreakerProbesOnceAndBacksOff: the breaker opens at Threshold, lets
// one probe through when the back-off ends, doubles the back-off when the
// probe fails (up to MaxBackoff), and closes on a good probe; a released
// probe passes its turn on.
func TestBreakerProbesOnceAndBacksOff(t *testing.T) {
	clock := clocktest.New()
	b := failsafe.NewBreaker(failsafe.BreakerConfig{Threshold: 2, Backoff: time.Second, MaxBackoff: 3 * time.Second, Clock: clock})
	now := clock.Now()
	for range 2 {
		if ok, probe := b.Allow(now); !ok || probe {
			t.Fatal("a closed breaker refused a call")
		}
		b.Failure(now, false)
	}
	if ok, _ := b.Allow(now); ok || b.Available() || b.RetryAfter(now) != time.Second {
		t.Fatalf("after Threshold failures: allowed %v, available %v, retry %v", ok, b.Available(), b.RetryAfter(now))
	}
	now = now.Add(time.Second)
	ok, probe := b.Allow(now)
	if !ok || !probe {
		t.Fatal("the back-off ended without a probe")
	}
	if ok, _ := b.Allow(now); ok {
		t.Fatal("a second probe while the first is in flight")
	}
	b.Release(probe)
	if _, probe = b.Allow(now); !probe {
		t.Fatal("a released probe did not pass its turn on")
	}
	b.Failure(now, probe)
	if got := b.OpenUntil().Sub(now); got != 2*time.Second {
		t.Fatalf("a failed probe reopened for %v, want 2s", got)
	}
	now = now.Add(2 * time.Second)
	_, probe = b.Allow(now)
	b.Failure(now, probe)
	if got := b.OpenUntil().Sub(now); got != 3*time.Second {
		t.Fatalf("back-off %v, want MaxBackoff 3s", got)
	}
	now = now.Add(3 * time.Second)
	_, probe = b.Allow(now)
	if !b.Success(probe) || !b.Available() || b.RetryAfter(now) != time.Second {
		t.Fatal("a good probe did not close the breaker and reset the back-off")
	}
	if n := testing.AllocsPerRun(100, func() {
		ok, probe := b.Allow(now)
		if ok {
			b.Success(probe)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per call, want 0", n)
	}
}

// TestOpenBreakerDecisionsAllocateNothing: while the breaker skips a dead
// store, an Open, Closed or Local decision allocates nothing (a dead Redis
// must not make every request cost garbage).
func TestOpenBreakerDecisionsAllocateNothing(t *testing.T) {
	for _, mode := range everyMode {
		l := newLimiter(t, mode, downPrimary(), clocktest.New(), &logs{})
		ctx := context.Background()
		for range 3 { // Threshold 3 opens the breaker
			l.AllowN(ctx, "k", lim, 1)
		}
		if l.Available() {
			t.Fatal("the breaker did not open")
		}
		if n := testing.AllocsPerRun(100, func() { l.AllowN(ctx, "k", lim, 1) }); n != 0 {
			t.Errorf("%v: %v allocations per decision with the breaker open, want 0", mode, n)
		}
	}
}
