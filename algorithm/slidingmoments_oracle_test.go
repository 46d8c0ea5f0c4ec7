package algorithm_test

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// studyEstimate is the estimator of the accuracy study
// (sim/estimators_test.go) in floating point: the units of the oldest
// sub-window, whose arrivals fell at offsets xs (shares of the
// sub-window), still inside the period once a share e of it has left,
// from the means of the first d Legendre polynomials rounded to q levels
// (and, as the limiter's signed byte holds them, to at most 127/q), before
// the clamp and the rounding. It returns the unclamped value and the
// distance of the nearest mean from a rounding boundary, in levels.
func studyEstimate(xs []float64, e float64, d int, q float64) (b, margin float64) {
	var px, pz [sluice.MaxMoments + 2]float64
	leg := func(z float64, p *[sluice.MaxMoments + 2]float64) {
		p[0], p[1] = 1, z
		for j := 1; j+1 < len(p); j++ {
			p[j+1] = ((2*float64(j)+1)*z*p[j] - float64(j)*p[j-1]) / float64(j+1)
		}
	}
	var S [sluice.MaxMoments + 1]float64
	for _, x := range xs {
		leg(2*x-1, &px)
		for j := 1; j <= d; j++ {
			S[j] += px[j]
		}
	}
	W := float64(len(xs))
	leg(2*e-1, &pz)
	b, margin = W*(1-e), math.Inf(1)
	for j := 1; j <= d; j++ {
		v := S[j] / W * q
		margin = min(margin, math.Abs(v-math.Floor(v)-0.5))
		m := math.Min(math.Max(math.Round(v), -127), 127) / q
		b += (pz[j-1] - pz[j+1]) / 2 * m * W
	}
	return b, margin
}

// TestSlidingMomentsEstimateIsTheStudys: on the same arrivals, the
// limiter's integer estimate of the oldest sub-window's weight is the
// study's floating-point one, clamped to [0, W] and rounded to the
// nearest, wherever the two arithmetics cannot round apart: the study is
// given each arrival at the midpoint of the offset level the limiter
// keeps (2^13 per sub-window) and of the decision's, and a case is
// skipped only when a mean or the estimate falls within a hair of a
// rounding boundary (the limiter's polynomials carry 14 fraction bits).
func TestSlidingMomentsEstimateIsTheStudys(t *testing.T) {
	const levels = 1 << 13
	compared := 0
	rapid.Check(t, func(t *rapid.T) {
		k := rapid.IntRange(1, sluice.MaxBuckets).Draw(t, "buckets")
		d := rapid.IntRange(1, sluice.MaxMoments).Draw(t, "moments")
		lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: sluice.MaxMomentsRate,
			Period: time.Duration(k) * time.Minute, Buckets: uint8(k), Moments: uint8(d)}
		g := int64(time.Minute)
		start := (t0/g + 1) * g // a sub-window's start
		w := rapid.IntRange(1, 400).Draw(t, "units")
		// Arrivals bunched or spread: offsets drawn from a random part of
		// the sub-window.
		lo := rapid.Int64Range(0, g-1).Draw(t, "from")
		hi := rapid.Int64Range(lo, g-1).Draw(t, "to")
		offs := rapid.SliceOfN(rapid.Int64Range(lo, hi), w, w).Draw(t, "offsets")
		var s algorithm.SlidingMoments
		var xs []float64
		for _, o := range sortedCopy(offs) {
			if !s.Take(start+o, lim, 1).Allowed {
				t.Fatalf("arrival at +%d refused", o)
			}
			lvl := o * levels / g
			xs = append(xs, (float64(lvl)+0.5)/levels)
		}
		e := rapid.Int64Range(0, g-1).Draw(t, "elapsed")
		now := start + int64(k)*g + e
		got := int64(lim.Rate) - int64(s.Peek(now, lim).Remaining)
		lvl := e * levels / g
		b, margin := studyEstimate(xs, (float64(lvl)+0.5)/levels, d, 128)
		want := math.Floor(math.Min(math.Max(b, 0), float64(w)) + 0.5)
		frac := b - math.Floor(b)
		if margin < 0.01 || math.Abs(frac-0.5) < 0.01+float64(w)*1e-4 {
			return // the two arithmetics may round apart here
		}
		compared++
		if float64(got) != want {
			t.Fatalf("k=%d d=%d, %d units, %v elapsed: limiter %d, study %.4f → %v", k, d, w, time.Duration(e), got, b, want)
		}
	})
	if compared < 50 {
		t.Fatalf("only %d cases compared", compared)
	}
}

func sortedCopy(xs []int64) []int64 {
	c := append([]int64(nil), xs...)
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && c[j] < c[j-1]; j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
	return c
}
