package failsafe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/failsafe"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// peekPrimary is a primary that can peek: down, it fails peeks too.
type peekPrimary struct{ *primary }

func (p peekPrimary) Peek(ctx context.Context, key string, lim sluice.Limit) (sluice.Result, error) {
	return p.AllowN(ctx, key, lim, 1)
}

// TestPeekFailureModes: while the primary fails, a peek answers as the
// mode says: Open allowed with the whole capacity, Closed an error wrapping
// ErrUnavailable with a RetryAfter, Local the local limiter's peek under
// the local share. A failed peek counts toward the breaker as a decision's
// failure does.
func TestPeekFailureModes(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Minute}
	ctx := context.Background()
	for _, tt := range []struct {
		mode failsafe.Mode
		want sluice.Result
		err  error
	}{
		{failsafe.Open, sluice.Result{Allowed: true, Remaining: 10}, nil},
		{failsafe.Closed, sluice.Result{RetryAfter: time.Second}, failsafe.ErrUnavailable},
		{failsafe.Local, sluice.Result{Allowed: true, Remaining: 5, ResetAfter: time.Minute}, nil}, // Nodes 2: 5 of 10
	} {
		t.Run(tt.mode.String(), func(t *testing.T) {
			clock := clocktest.At(time.Unix(1700000040, 0))
			p := downPrimary()
			l := newPeekLimiter(t, tt.mode, p, clock)
			for i := range 4 { // the third failure opens the breaker; the fourth is skipped
				got, err := l.Peek(ctx, "k", lim)
				if !errors.Is(err, tt.err) || err != nil && tt.err == nil {
					t.Fatalf("peek %d: error %v, want %v", i, err, tt.err)
				}
				if tt.mode == failsafe.Closed {
					got.RetryAfter = min(got.RetryAfter, time.Second) // the back-off while the breaker is still closed
				}
				if got != tt.want {
					t.Errorf("peek %d = %+v, want %+v", i, got, tt.want)
				}
			}
			if n := p.calls.Load(); n != 3 {
				t.Errorf("primary called %d times, want 3 (the breaker opens after 3 failed peeks)", n)
			}
			if l.Available() {
				t.Error("breaker closed after 3 failed peeks")
			}
		})
	}
}

// newPeekLimiter is newLimiter over a primary that can peek.
func newPeekLimiter(t *testing.T, mode failsafe.Mode, p *primary, clock sluice.Clock) *failsafe.Limiter {
	t.Helper()
	return newLimiter(t, mode, peekPrimary{p}, clock, &logs{})
}

// TestPeekPrimaryThatCannotPeek: a primary that is not a sluice.Peeker
// makes Peek fail with errors.ErrUnsupported, which trips nothing.
func TestPeekPrimaryThatCannotPeek(t *testing.T) {
	l := newLimiter(t, failsafe.Open, downPrimary(), clocktest.New(), &logs{})
	lim := sluice.PerMinute(10)
	for range 5 {
		if _, err := l.Peek(context.Background(), "k", lim); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Peek through a primary that cannot peek: %v, want errors.ErrUnsupported", err)
		}
	}
	if !l.Available() {
		t.Error("the breaker opened on peeks the primary cannot answer")
	}
}
