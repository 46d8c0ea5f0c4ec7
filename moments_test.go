package sluice_test

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestMomentsLimits: moments are for a sliding window, at most MaxMoments,
// with a period its sub-windows divide in whole microseconds and a rate
// its 16-bit counts and one-byte means serve; String names them.
func TestMomentsLimits(t *testing.T) {
	sw := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute, Buckets: 8, Moments: 4}
	if err := sw.Validate(); err != nil {
		t.Fatalf("Validate(%v) = %v", sw, err)
	}
	if got, want := sw.String(), "sliding_window 100/1m0s buckets 8 moments 4"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	one := sw
	one.Buckets, one.Period = 0, 1500*time.Nanosecond
	bad := map[string]sluice.Limit{}
	tb := sw
	tb.Algorithm, tb.Buckets, tb.Burst = sluice.TokenBucket, 0, 1
	bad["token bucket"] = tb
	many := sw
	many.Moments = sluice.MaxMoments + 1
	bad["too many moments"] = many
	fast := sw
	fast.Rate = sluice.MaxMomentsRate + 1
	bad["rate above MaxMomentsRate"] = fast
	bad["one sub-window of 1.5µs"] = one
	odd := sw
	odd.Period = 8*time.Microsecond + 8
	bad["period not whole microseconds times 8"] = odd
	for name, lim := range bad {
		if err := lim.Validate(); !errors.Is(err, sluice.ErrInvalidLimit) {
			t.Errorf("%s: Validate(%v) = %v, want an error wrapping ErrInvalidLimit", name, lim, err)
		}
	}
}
