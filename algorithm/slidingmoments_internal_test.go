package algorithm

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
)

// TestMomentsErrBound: at every offset level, each polynomial legendre
// computes is within momentsErr of the exact one (times momentOne), which
// the retry search's bounds rely on.
func TestMomentsErrBound(t *testing.T) {
	for x := int64(0); x < offsetLevels; x++ {
		var p [sluice.MaxMoments + 2]int64
		z := levelZ(x)
		legendre(z, sluice.MaxMoments, &p)
		zr := float64(z) / momentOne
		exact := [sluice.MaxMoments + 2]float64{1, zr}
		for j := 1; j <= sluice.MaxMoments; j++ {
			exact[j+1] = (float64(2*j+1)*zr*exact[j] - float64(j)*exact[j-1]) / float64(j+1)
		}
		for j := range p {
			if err := math.Abs(float64(p[j]) - momentOne*exact[j]); err > float64(momentsErr[j]) {
				t.Fatalf("level %d: P_%d = %d, exact %.4f: off by %.4f, more than %d", x, j, p[j], momentOne*exact[j], err, momentsErr[j])
			}
		}
	}
}

// TestFitSearchIsAScan: for any means (the extreme ones included), count,
// room, sub-window length and first offset, the retry search finds the
// offset a scan of every one finds: the first at which the weight fits.
func TestFitSearchIsAScan(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := rapid.IntRange(1, sluice.MaxMoments).Draw(t, "d")
		f := fitSearch{d: d}
		extreme := rapid.SampledFrom([]int64{-127, -64, 0, 64, 127})
		for j := 1; j <= d; j++ {
			f.m[j] = rapid.OneOf(rapid.Int64Range(-127, 127), extreme).Draw(t, "mean")
		}
		f.w = rapid.Int64Range(1, maxMomentCount).Draw(t, "w")
		room := rapid.Int64Range(0, f.w-1).Draw(t, "room")
		f.g = rapid.OneOf(rapid.Int64Range(1, offsetLevels-1), rapid.Int64Range(offsetLevels, 1e10)).Draw(t, "g")
		n := min(f.g, offsetLevels)
		from := rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(0, n-1)).Draw(t, "from")
		f.prepare(room)
		want := int64(-1)
		for u := from; u < n; u++ {
			var p [sluice.MaxMoments + 2]int64
			legendre(levelZ(f.level(u)), d, &p)
			if momentsWeight(f.w, &f.m, &p, d) <= room {
				want = u
				break
			}
		}
		if got := f.first(from, n-1); got != want {
			t.Fatalf("means %v, w %d, room %d, g %d: first fit from %d found at %d, a scan finds %d", f.m[1:d+1], f.w, room, f.g, from, got, want)
		}
	})
}
