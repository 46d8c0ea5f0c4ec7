package config_test

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/config"
)

// TestBurstIsForBucketsAndDefaultsToTheRate checks the one burst rule of
// both files: a bucket takes the burst set, else its rate; any other
// algorithm refuses a burst set, naming the buckets.
func TestBurstIsForBucketsAndDefaultsToTheRate(t *testing.T) {
	if got := config.AlgorithmNames; got != "token_bucket, fixed_window, sliding_window, sliding_log or leaky_bucket" {
		t.Errorf("AlgorithmNames = %q", got)
	}
	for _, alg := range sluice.Algorithms() {
		if b, err := config.Burst(alg, 10, 0, false); err != nil || b != 10 {
			t.Errorf("%v with no burst: %d, %v; want the rate, 10", alg, b, err)
		}
		b, err := config.Burst(alg, 10, 3, true)
		switch {
		case alg.UsesBurst() && (err != nil || b != 3):
			t.Errorf("%v with burst 3: %d, %v; want 3", alg, b, err)
		case !alg.UsesBurst() && (err == nil || err.Error() != "burst applies only to token_bucket and leaky_bucket, not "+alg.String()):
			t.Errorf("%v with burst 3: error %v, want one naming the buckets", alg, err)
		}
	}
}

// TestDefaultSlidingWindowOnlyWhereMomentsAreAllowed checks the one
// default rule both files use: 16 buckets and 2 moments for a sliding
// window that allows them, every other limit unchanged.
func TestDefaultSlidingWindowOnlyWhereMomentsAreAllowed(t *testing.T) {
	sw := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute}
	if got := config.DefaultSlidingWindow(sw); got.Buckets != 16 || got.Moments != 2 {
		t.Errorf("DefaultSlidingWindow(%v) = %v, want buckets 16 moments 2", sw, got)
	}
	for _, lim := range []sluice.Limit{
		{Algorithm: sluice.SlidingWindow, Rate: 10_001, Period: time.Minute},                   // above MaxMomentsRate
		{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Second + 8*time.Microsecond}, // not 16 whole µs
		{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute, Buckets: 1},
		{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Minute, Buckets: 4},
		{Algorithm: sluice.SlidingWindow, Rate: 0, Period: time.Minute},
		{Algorithm: sluice.FixedWindow, Rate: 100, Period: time.Minute},
		{Algorithm: sluice.TokenBucket, Rate: 100, Period: time.Minute, Burst: 100},
	} {
		if got := config.DefaultSlidingWindow(lim); got != lim {
			t.Errorf("DefaultSlidingWindow(%v) = %v, want it unchanged", lim, got)
		}
	}
}
