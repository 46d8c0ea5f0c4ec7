package grpclimit_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/client"
	"github.com/sluicehq/sluice/grpclimit"
)

// failing is a Limiter whose every call fails with err and res.
type failing struct {
	res sluice.Result
	err error
}

func (f failing) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	return f.res, f.err
}

func TestAFailingLimiterFailsOpenUnlessToldOtherwise(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	down := errors.New("connection refused")
	closed := failing{res: sluice.Result{RetryAfter: 3 * time.Second}, err: fmt.Errorf("store down: %w", sluice.ErrUnavailable)}
	for _, tc := range []struct {
		name     string
		limiter  sluice.Limiter
		code     codes.Code // StoreErrorCode
		want     codes.Code
		wantWait time.Duration
	}{
		{"failing, fail open", failing{err: down}, codes.OK, codes.OK, 0},
		{"failing, StoreErrorCode", failing{err: down}, codes.Internal, codes.Internal, 0},
		{"failing closed", closed, codes.OK, codes.Unavailable, 3 * time.Second},
		{"failing closed, StoreErrorCode", closed, codes.ResourceExhausted, codes.ResourceExhausted, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rl := newRateLimit(t, grpclimit.RateLimitConfig{
				Limiter: tc.limiter, Limit: sluice.PerSecond(1), StoreErrorCode: tc.code, Logger: quiet,
			})
			called := false
			_, err := rl.Unary()(context.Background(), nil, info, func(context.Context, any) (any, error) {
				called = true
				return nil, nil
			})
			if status.Code(err) != tc.want || called != (tc.want == codes.OK) {
				t.Fatalf("got %v (handler called: %v), want %v", err, called, tc.want)
			}
			if d, _ := client.RetryInfoDelay(err); d != tc.wantWait {
				t.Errorf("RetryInfo %v, want %v", d, tc.wantWait)
			}
		})
	}
}

func TestNewRateLimitRefusesInvalidLimits(t *testing.T) {
	for name, c := range map[string]grpclimit.RateLimitConfig{
		"no limiter":       {Limit: sluice.PerSecond(1)},
		"invalid limit":    {Limiter: failing{}, Limit: sluice.Limit{Rate: -1, Period: time.Second}},
		"invalid override": {Limiter: failing{}, Methods: map[string]sluice.Limit{"/a.B/C": {Rate: 1}}},
	} {
		if _, err := grpclimit.NewRateLimit(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A cost the limit cannot take (below 1, or past the limit's capacity) is
// the caller's mistake, not the store's failure: it is refused with
// INVALID_ARGUMENT, whatever StoreErrorCode says, rather than let through
// unlimited as a failing store would be.
func TestABadCostIsRefusedAsInvalidArgumentNotLetThrough(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, cost := range []int{0, -1, 1000} {
		rl := newRateLimit(t, grpclimit.RateLimitConfig{
			Limit: sluice.PerSecond(10), Logger: quiet,
			Cost: func(context.Context, string) int { return cost },
		})
		called := false
		_, err := rl.Unary()(context.Background(), nil, info, func(context.Context, any) (any, error) {
			called = true
			return nil, nil
		})
		if status.Code(err) != codes.InvalidArgument || called {
			t.Errorf("cost %d: got %v (handler called: %v), want InvalidArgument", cost, err, called)
		}
	}
}
