package config_test

import (
	"testing"

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
