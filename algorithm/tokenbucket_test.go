package algorithm_test

import (
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

func TestTokenBucketSteps(t *testing.T) {
	const ms = time.Millisecond
	// 5/s with a burst of 10: one token every 200 ms, a full bucket in 2 s.
	lim := sluice.PerSecond(5).WithBurst(10)
	steps := concat(
		// Ten back to back drain the bucket; after 3 Remaining is 7.
		repeat(10, 0, 1, func(i int) outcome { return ok(9-i, time.Duration(i+1)*200*ms) }),
		[]step{
			// The 11th waits for one token: 200 ms, never a full reset.
			{0, 1, no(0, 200*ms, 2*time.Second)},
			{200*ms - 1, 1, no(0, 1, 1800*ms+1)},
			{200 * ms, 1, ok(0, 2*time.Second)},
			{1 * time.Second, 1, ok(3, 1400*ms)},
			// Idle long enough to be full again.
			{10 * time.Second, 10, ok(0, 2*time.Second)},
		},
	)
	run(t, new(algorithm.TokenBucket), lim, steps)
}

func TestTokenBucketCost(t *testing.T) {
	const ms = time.Millisecond
	lim := sluice.PerSecond(5).WithBurst(10)
	run(t, new(algorithm.TokenBucket), lim, []step{
		{0, 4, ok(6, 800*ms)},
		// 7 tokens are needed, 6 are there: one more token, 200 ms.
		{0, 7, no(6, 200*ms, 800*ms)},
		{0, 6, ok(0, 2*time.Second)},
		{200 * ms, 2, no(1, 200*ms, 1800*ms)},
		{400*ms - 1, 2, no(1, 1, 1600*ms+1)},
		{400 * ms, 2, ok(0, 2*time.Second)},
		// A cost of the whole burst waits for the whole bucket.
		{400 * ms, 10, no(0, 2*time.Second, 2*time.Second)},
		{2400 * ms, 10, ok(0, 2*time.Second)},
	})
}

func TestTokenBucketEvery(t *testing.T) {
	const ms = time.Millisecond
	lim := sluice.Every(100 * ms) // burst 1
	run(t, new(algorithm.TokenBucket), lim, []step{
		{0, 1, ok(0, 100*ms)},
		{50 * ms, 1, no(0, 50*ms, 50*ms)},
		{100 * ms, 1, ok(0, 100*ms)},
		{350 * ms, 1, ok(0, 100*ms)},
		{350 * ms, 1, no(0, 100*ms, 100*ms)},
	})
}

func TestTokenBucketInterval(t *testing.T) {
	for _, tt := range []struct {
		lim  sluice.Limit
		want int64
	}{
		{sluice.PerSecond(5), 200e6},
		{sluice.PerMinute(7), 8571428572}, // rounded up: the limit is never exceeded
		{sluice.Limit{Rate: 3, Period: 10, Burst: 1}, 4},
		{sluice.Every(time.Hour), int64(time.Hour)},
	} {
		if got := algorithm.Interval(tt.lim); got != tt.want {
			t.Errorf("Interval(%v) = %d, want %d", tt.lim, got, tt.want)
		}
	}
}

// TestTokenBucketBound checks that a token bucket never admits more than
// Burst + Rate·(b−a)/Period units in any closed interval [a, b]:
// admitted·Period ≤ Burst·Period + Rate·(b−a), in exact arithmetic.
func TestTokenBucketBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim, reqs := drawRun(t, sluice.TokenBucket, 1, 120)
		admitted, _ := play(new(algorithm.TokenBucket), lim, reqs)
		p, burst, rate := big.NewInt(int64(lim.Period)), big.NewInt(int64(lim.Burst)), big.NewInt(int64(lim.Rate))
		for i, a := range admitted {
			units := int64(0)
			for _, b := range admitted[i:] {
				units += int64(b.cost)
				// units·P ≤ Burst·P + Rate·(b−a)
				left := new(big.Int).Mul(big.NewInt(units), p)
				right := new(big.Int).Mul(burst, p)
				right.Add(right, new(big.Int).Mul(rate, big.NewInt(b.at-a.at)))
				if left.Cmp(right) > 0 {
					t.Fatalf("%v admitted %d units in [t0%+d, t0%+d], more than %d + %d·%v/%v",
						lim, units, a.at-t0, b.at-t0, lim.Burst, lim.Rate, time.Duration(b.at-a.at), lim.Period)
				}
			}
		}
	})
}
