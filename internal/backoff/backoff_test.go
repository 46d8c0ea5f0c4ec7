package backoff

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// Retry, the back-off of the lazy Redis store and of PostgreSQL's ping:
// after each failed call it waits First, doubling up to Max, and waits
// before the first call too when the caller has just failed; it stops on
// the first success, and when its context ends.
func TestRetryBacksOffUntilSuccessOrTheEnd(t *testing.T) {
	for _, tt := range []struct {
		name       string
		failedOnce bool
		want       []time.Duration // when each call came, from the start
	}{
		{"tried at once", false, []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, 3500 * time.Millisecond}},
		{"after a failure", true, []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 3500 * time.Millisecond, 7500 * time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				var calls []time.Duration
				ok := Retry(t.Context(), tt.failedOnce, func(ctx context.Context) error {
					if _, has := ctx.Deadline(); !has {
						t.Error("a call without a deadline")
					}
					calls = append(calls, time.Since(start))
					if len(calls) < 4 {
						return errors.New("refused")
					}
					return nil
				})
				if !ok || !slices.Equal(calls, tt.want) {
					t.Errorf("returned %v, calls at %v; want true, calls at %v", ok, calls, tt.want)
				}
			})
		})
	}
	t.Run("capped, then the end", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			defer cancel()
			var calls []time.Time
			ok := Retry(ctx, false, func(context.Context) error {
				calls = append(calls, time.Now())
				return errors.New("refused")
			})
			gap := calls[len(calls)-1].Sub(calls[len(calls)-2])
			if ok || gap != Max {
				t.Errorf("returned %v, last gap %v; want false once the context ended, the waits capped at %v", ok, gap, Max)
			}
		})
	})
}
