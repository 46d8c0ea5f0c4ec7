package adaptive_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/internal/clocktest"
)

func mustNew(t testing.TB, c adaptive.Config) *adaptive.Limiter {
	t.Helper()
	l, err := adaptive.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// fill acquires n tokens of priority p, failing the test if one is refused.
func fill(t *testing.T, l *adaptive.Limiter, p adaptive.Priority, n int) []adaptive.Token {
	t.Helper()
	toks := make([]adaptive.Token, n)
	for i := range toks {
		tok, ok := l.Acquire(context.Background(), p)
		if !ok {
			t.Fatalf("acquire %d of %d (%v) refused; stats %+v", i+1, n, p, l.Stats())
		}
		toks[i] = tok
	}
	return toks
}

func TestAcquireRefusesAtTheLimitAndReleaseFreesASlot(t *testing.T) {
	l := mustNew(t, adaptive.Config{Initial: 4, Clock: clocktest.New()})
	toks := fill(t, l, adaptive.Critical, 4)
	if _, ok := l.Acquire(context.Background(), adaptive.Critical); ok {
		t.Fatal("a fifth request was admitted under a limit of 4")
	}
	toks[0].Release()
	if _, ok := l.Acquire(context.Background(), adaptive.Critical); !ok {
		t.Fatal("a slot freed by Release was not reusable")
	}
	s := l.Stats()
	if s.InFlight != 4 || s.Admitted.Of(adaptive.Critical) != 5 || s.Rejected.Of(adaptive.Critical) != 1 {
		t.Errorf("stats %+v, want 4 in flight, 5 admitted, 1 rejected", s)
	}
}

func TestPrioritiesFillOnlyTheirShareOfTheLimit(t *testing.T) {
	// Limit 10: sheddable may fill 7, default 9, critical all 10.
	l := mustNew(t, adaptive.Config{Initial: 10, Clock: clocktest.New()})
	fill(t, l, adaptive.Sheddable, 7)
	if _, ok := l.Acquire(context.Background(), adaptive.Sheddable); ok {
		t.Fatal("an eighth sheddable request was admitted: its share of 10 is 7")
	}
	fill(t, l, adaptive.Default, 2)
	if _, ok := l.Acquire(context.Background(), adaptive.Default); ok {
		t.Fatal("a default request was admitted with 9 of 10 in flight: its share is 9")
	}
	fill(t, l, adaptive.Critical, 1)
	if _, ok := l.Acquire(context.Background(), adaptive.Critical); ok {
		t.Fatal("a critical request was admitted over the limit")
	}
}

func TestNoPriorityStarvesAtTheFloor(t *testing.T) {
	l := mustNew(t, adaptive.Config{Initial: 1, Clock: clocktest.New()})
	tok, ok := l.Acquire(context.Background(), adaptive.Sheddable)
	if !ok {
		t.Fatal("a sheddable request was refused with nothing in flight")
	}
	if _, ok := l.Acquire(context.Background(), adaptive.Critical); ok {
		t.Fatal("a second request was admitted under a limit of 1")
	}
	tok.Done(adaptive.Success)
}

func TestAcquireWithADoneContextIsRefusedUncounted(t *testing.T) {
	l := mustNew(t, adaptive.Config{Clock: clocktest.New()})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := l.Acquire(ctx, adaptive.Default); ok {
		t.Fatal("admitted a request whose caller has gone")
	}
	if s := l.Stats(); s.Rejected.Total() != 0 || s.InFlight != 0 {
		t.Errorf("stats %+v: a gone caller is neither admitted nor counted as shed", s)
	}
}

func TestTheZeroTokenDoesNothing(t *testing.T) {
	l := mustNew(t, adaptive.Config{Initial: 1, Clock: clocktest.New()})
	tok := fill(t, l, adaptive.Default, 1)[0]
	var zero adaptive.Token
	zero.Done(adaptive.Success)
	zero.Release()
	zero.Record(time.Second, adaptive.Dropped)
	if s := l.Stats(); s.InFlight != 1 {
		t.Errorf("a zero Token freed a slot: %d in flight, want 1", s.InFlight)
	}
	tok.Release()
}

// window completes n requests of latency rtt (outcome o) after advancing
// the clock past the window, and returns the limit after.
func window(t *testing.T, l *adaptive.Limiter, clock *clocktest.Clock, n int, rtt time.Duration, o adaptive.Outcome) int {
	t.Helper()
	toks := fill(t, l, adaptive.Critical, n)
	clock.Advance(rtt)
	for _, tok := range toks {
		tok.Done(o)
	}
	return l.Limit()
}

func TestTheLimitMovesOnlyAfterAWindowOfEnoughSamples(t *testing.T) {
	clock := clocktest.New()
	l := mustNew(t, adaptive.Config{
		Algorithm: adaptive.AIMD{Timeout: 50 * time.Millisecond}, Initial: 10, MinSamples: 10,
		Window: time.Second, Clock: clock,
	})
	// 100ms in: too soon, however many samples.
	if got := window(t, l, clock, 10, 100*time.Millisecond, adaptive.Dropped); got != 10 {
		t.Fatalf("limit %d after 100ms of a 1s window, want 10 unchanged", got)
	}
	clock.Advance(time.Second)
	// Past the span, but 5 samples of 10 needed... plus the 10 already
	// there: the window closes with 15 and backs off once.
	if got := window(t, l, clock, 5, 100*time.Millisecond, adaptive.Dropped); got != 9 {
		t.Fatalf("limit %d after a window with drops, want int(10·0.9) = 9", got)
	}
	clock.Advance(time.Second)
	if got := window(t, l, clock, 5, 10*time.Millisecond, adaptive.Success); got != 9 {
		t.Fatalf("limit %d after a window of 5 samples, want 9: MinSamples is 10", got)
	}
}

func TestAIMDStaysWithinFloorAndCeiling(t *testing.T) {
	clock := clocktest.New()
	l := mustNew(t, adaptive.Config{
		Algorithm: adaptive.AIMD{Timeout: 50 * time.Millisecond}, Initial: 5, Min: 3, Max: 7,
		MinSamples: 1, Window: time.Millisecond, Clock: clock,
	})
	for range 10 {
		window(t, l, clock, l.Limit(), 10*time.Millisecond, adaptive.Success)
	}
	if got := l.Limit(); got != 7 {
		t.Fatalf("limit %d after ten good full windows, want the ceiling 7", got)
	}
	for range 10 {
		window(t, l, clock, 1, 100*time.Millisecond, adaptive.Success)
	}
	if got := l.Limit(); got != 3 {
		t.Fatalf("limit %d after ten slow windows, want the floor 3", got)
	}
}

func TestGradient2FallsWhenLatencyRisesAndHoldsWhenIdle(t *testing.T) {
	clock := clocktest.New()
	l := mustNew(t, adaptive.Config{Initial: 40, MinSamples: 1, Window: time.Millisecond, Clock: clock})
	for range 10 { // warm-up: long = 10ms
		window(t, l, clock, 20, 10*time.Millisecond, adaptive.Success)
	}
	before := l.Limit()
	if got := window(t, l, clock, 5, 40*time.Millisecond, adaptive.Success); got != before {
		t.Fatalf("limit moved from %d to %d with 5 in flight, under half the limit", before, got)
	}
	for range 5 {
		window(t, l, clock, l.Limit(), 40*time.Millisecond, adaptive.Success)
	}
	if got := l.Limit(); got >= before {
		t.Fatalf("limit %d after five full windows at 4× the long latency, want below %d", got, before)
	}
	if s := l.Stats(); s.RTT != 40*time.Millisecond || l.RetryAfter() != 40*time.Millisecond {
		t.Errorf("stats RTT %v, RetryAfter %v, want the last window's mean, 40ms", s.RTT, l.RetryAfter())
	}
}

// closedWindow completes n requests of latency rtt in one window of an
// hour-long span: the clock passes the span before the last completion,
// which closes the window with all n samples in it. It returns the limit
// after.
func closedWindow(t *testing.T, l *adaptive.Limiter, clock *clocktest.Clock, n int, rtt time.Duration) int {
	t.Helper()
	toks := fill(t, l, adaptive.Critical, n)
	for _, tok := range toks[:n-1] {
		tok.Record(rtt, adaptive.Success)
	}
	clock.Advance(time.Hour)
	toks[n-1].Record(rtt, adaptive.Success)
	return l.Limit()
}

func TestGradientMeasuresMinRTTAtLowConcurrencyThenRestoresTheLimit(t *testing.T) {
	clock := clocktest.New()
	l := mustNew(t, adaptive.Config{
		Algorithm: adaptive.Gradient{ProbeInterval: 150 * time.Minute, Jitter: -1},
		Initial:   40, MinSamples: 1, Window: time.Hour, Clock: clock,
	})
	for _, w := range []struct {
		n    int           // requests in the window
		rtt  time.Duration // each one's latency
		want int           // the limit after
		why  string
	}{
		// The first window starts a measurement: the limit is pinned to
		// 3, one window drains, the next measures.
		{30, 20 * time.Millisecond, 3, "after the first window, want 3 while minRTT is measured"},
		{3, 50 * time.Millisecond, 3, "after the draining window, want 3"},
		{3, 10 * time.Millisecond, 40, "after the measurement, want 40 restored"},
		// minRTT is 10ms, the target 12.5ms (a 25% buffer): at the target
		// the limit grows by √40, to 46.
		{40, 12500 * time.Microsecond, 46, "after a window at the target, want 40+√40 = 46"},
		// At twice the target, the gradient is 0.5: 46·0.5+√46 = 29.8.
		{46, 25 * time.Millisecond, 29, "after a window at twice the target, want 29"},
		// The interval has passed: the next window measures again.
		{29, 12500 * time.Microsecond, 3, "a ProbeInterval later, want 3 while minRTT is measured again"},
	} {
		if got := closedWindow(t, l, clock, w.n, w.rtt); got != w.want {
			t.Fatalf("limit %d %s", got, w.why)
		}
	}
}

func TestNewRefusesBadConfigs(t *testing.T) {
	for name, c := range map[string]adaptive.Config{
		"min above max":      {Min: 10, Max: 5},
		"negative min":       {Min: -1},
		"share above one":    {DefaultShare: 1.5},
		"negative window":    {Window: -time.Second},
		"gradient tolerance": {Algorithm: adaptive.Gradient2{Tolerance: 0.5}},
		"aimd ratio":         {Algorithm: adaptive.AIMD{BackoffRatio: 1}},
		"gradient buffer":    {Algorithm: adaptive.Gradient{Buffer: -1}},
		"gradient probe":     {Algorithm: adaptive.Gradient{ProbeConcurrency: -1}},
	} {
		if _, err := adaptive.New(c); !errors.Is(err, adaptive.ErrInvalidConfig) {
			t.Errorf("%s: New returned %v, want ErrInvalidConfig", name, err)
		}
	}
}

func TestPriorityNamesRoundTrip(t *testing.T) {
	for _, p := range []adaptive.Priority{adaptive.Sheddable, adaptive.Default, adaptive.Critical} {
		if got, err := adaptive.ParsePriority(p.String()); err != nil || got != p {
			t.Errorf("ParsePriority(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := adaptive.ParsePriority("urgent"); err == nil {
		t.Error("ParsePriority accepted an unknown name")
	}
	if adaptive.Priority(-100).Index() != 0 || adaptive.Priority(100).Index() != 2 {
		t.Error("out-of-range priorities are not clamped")
	}
}

func TestAcquireAndDoneDoNotAllocate(t *testing.T) {
	l := mustNew(t, adaptive.Config{Clock: clocktest.New(), MinSamples: 1, Window: time.Nanosecond})
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		tok, ok := l.Acquire(ctx, adaptive.Default)
		if !ok {
			t.Fatal("refused")
		}
		tok.Record(time.Millisecond, adaptive.Success)
	})
	if allocs != 0 {
		t.Errorf("Acquire and Done allocate %v times per request, want 0", allocs)
	}
}

func BenchmarkAcquireDone(b *testing.B) {
	l := mustNew(b, adaptive.Config{Max: 1 << 20, Initial: 1 << 20})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		tok, _ := l.Acquire(ctx, adaptive.Default)
		tok.Done(adaptive.Success)
	}
}

func BenchmarkAcquireDoneParallel(b *testing.B) {
	l := mustNew(b, adaptive.Config{Max: 1 << 20, Initial: 1 << 20})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			tok, _ := l.Acquire(ctx, adaptive.Default)
			tok.Done(adaptive.Success)
		}
	})
}

func TestATokenEndedTwiceOpensNoExtraSlot(t *testing.T) {
	l := mustNew(t, adaptive.Config{Initial: 2, Clock: clocktest.New()})
	tok := fill(t, l, adaptive.Critical, 1)[0]
	tok.Release()
	tok.Release()
	fill(t, l, adaptive.Critical, 2)
	if _, ok := l.Acquire(context.Background(), adaptive.Critical); ok {
		t.Fatal("a third request was admitted under a limit of 2 after a Token was released twice")
	}
}
