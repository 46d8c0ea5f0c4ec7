package client

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice"
)

// A Pacer's own limiter decides with the algorithm of the limit it is given,
// refuses bad input as every store does, and its sweep forgets a key once
// its state is as good as fresh.
func TestLocalLimiterDecidesAndSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newLocalLimiter()
		ctx := context.Background()
		lim := sluice.PerSecond(2).WithBurst(1)
		if res, err := l.AllowN(ctx, "api", lim, 1); err != nil || !res.Allowed {
			t.Fatalf("first: %+v, %v", res, err)
		}
		if res, err := l.AllowN(ctx, "api", lim, 1); err != nil || res.Allowed || res.RetryAfter != 500*time.Millisecond {
			t.Fatalf("second at once: %+v, %v; want a denial with RetryAfter 500ms", res, err)
		}
		// A fixed window on the same key has its own state.
		if res, err := l.AllowN(ctx, "api", sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Second}, 1); err != nil || !res.Allowed {
			t.Fatalf("another algorithm on the same key: %+v, %v", res, err)
		}
		if _, err := l.AllowN(ctx, "", lim, 1); !errors.Is(err, sluice.ErrInvalidKey) {
			t.Errorf("empty key: %v, want ErrInvalidKey", err)
		}
		if _, err := l.AllowN(ctx, "api", sluice.Limit{}, 1); !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Errorf("zero limit: %v, want ErrInvalidLimit", err)
		}
		l.sweep()
		if n := len(l.states); n != 2 {
			t.Fatalf("%d states after a sweep at once, want 2", n)
		}
		time.Sleep(2 * time.Second) // fake time: the bubble's clock
		l.sweep()
		if n := len(l.states); n != 0 {
			t.Errorf("%d states after a sweep when both are fresh again, want 0", n)
		}
	})
}
