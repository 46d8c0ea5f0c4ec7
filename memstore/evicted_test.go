package memstore

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
)

// A sketch answers, for every key it took in, an instant and units no
// smaller than the key's own, however full it is: a collision only ever
// makes a key look more spent. Checked at loads from a tenth of its cells
// to ten times them, where most keys share a wildcard.
func TestSketchNeverRemembersLessThanAKeyLeft(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const now = int64(1_000_000)
	for _, keys := range []int{6, 60, 600} { // 64 cells
		t.Run(fmt.Sprintf("keys=%d", keys), func(t *testing.T) {
			s := sketch{n: 16}
			type left struct{ h, until, units uint64 }
			var all []left
			for range keys {
				k := left{rng.Uint64(), uint64(now + 1 + rng.Int64N(1e6)), uint64(rng.Int64N(1e10))}
				s.remember(k.h, now, int64(k.until), int64(k.units))
				all = append(all, k)
			}
			for i, k := range all {
				until, units, ok := s.recall(k.h, now, false)
				if !ok || until < int64(k.until) || units < min(int64(k.units), saturatedUnits) && k.units < unitsSaturated {
					t.Fatalf("key %d left until %d, units %d; the sketch recalls %d, %d, %v", i, k.until, k.units, until, units, ok)
				}
				if k.units >= unitsSaturated && units != saturatedUnits {
					t.Fatalf("key %d left %d units, more than a cell counts; recalled %d, want saturatedUnits", i, k.units, units)
				}
			}
			if keys > 4*16*2 && s.merged == 0 {
				t.Errorf("%d keys in 64 cells merged none", keys)
			}
		})
	}
}

// A cell frees itself when its instant passes: the sketch forgets a key
// once its state would have been fresh, and that cell takes another key
// without merging.
func TestSketchCellsFreeThemselvesAtTheirInstant(t *testing.T) {
	s := sketch{n: 1}
	for i := range uint64(sketchWays) {
		s.remember(i*0x1234567, 0, 100, 3)
	}
	if _, _, ok := s.recall(0, 99, false); !ok {
		t.Fatal("a key is forgotten before its instant")
	}
	if _, _, ok := s.recall(0, 100, false); ok {
		t.Fatal("a key is still remembered at its instant, when its state is fresh")
	}
	s.remember(999, 100, 200, 1)
	if s.merged != 0 {
		t.Errorf("a key merged into a wildcard while every cell was free")
	}
	if _, units, ok := s.recall(999, 150, true); !ok || units != 1 {
		t.Errorf("recall(999) = %d units, %v; want 1, true", units, ok)
	}
	if _, _, ok := s.recall(999, 150, false); ok {
		t.Errorf("a key recalled with take is still remembered")
	}
}

// The share of keys never evicted that a sketch takes for spent (they match
// a wildcard, or another key's fingerprint), by how many live evicted keys
// it holds per cell. The figures are the ones docs/architecture.md states;
// the test fails if the sketch does worse than they say.
func TestSketchFalseSpentRateByLoad(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const buckets = 4096 // 16,384 cells
	for _, tc := range []struct {
		load float64 // live evicted keys per cell
		max  float64 // the false "spent" rate stated
	}{
		{0.5, 0.0001}, {0.75, 0.0001}, {0.9, 0.0001}, {0.95, 0.05}, {1, 0.25}, {1.5, 0.9}, {2, 0.95},
	} {
		s := sketch{n: buckets}
		for range int(tc.load * buckets * sketchWays) {
			s.remember(rng.Uint64(), 0, 1000, 1)
		}
		const probes = 100_000
		spent := 0
		for range probes {
			if _, _, ok := s.recall(rng.Uint64(), 0, false); ok {
				spent++
			}
		}
		rate := float64(spent) / probes
		t.Logf("load %.2f: %.4f%% of new keys start spent, %.2f%% of evictions merged", tc.load, 100*rate, 100*float64(s.merged)/float64(s.remembered))
		if rate > tc.max {
			t.Errorf("load %.2f: %.4f of new keys start spent, more than the %.4f stated", tc.load, rate, tc.max)
		}
	}
}

// Every algorithm's state, evicted and rebuilt from what it left in the
// sketch, is at least as spent as the state it was: at every later instant
// the rebuilt state admits a cost only if the evicted one would.
func TestRestoredStateIsNoLessSpent(t *testing.T) {
	lims := []sluice.Limit{
		{Algorithm: sluice.TokenBucket, Rate: 10, Period: time.Minute, Burst: 10},
		{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Minute},
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute},
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 4},
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 16},
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Moments: 2},
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 4, Moments: 2},
		{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Buckets: 8, Moments: 6},
		{Algorithm: sluice.SlidingLog, Rate: 10, Period: time.Minute},
		{Algorithm: sluice.SlidingLog, Rate: 200, Period: time.Minute},
		{Algorithm: sluice.LeakyBucket, Rate: 10, Period: time.Minute, Burst: 10},
	}
	for _, lim := range lims {
		t.Run(fmt.Sprintf("%v-%d-%d-%d", lim.Algorithm, lim.Rate, lim.Buckets, lim.Moments), func(t *testing.T) {
			switch lim.Algorithm {
			case sluice.SlidingWindow:
				if lim.Moments > 0 {
					checkRestore[algorithm.SlidingMoments](t, lim)
				} else if lim.Buckets > 1 {
					checkRestore[algorithm.SlidingBuckets](t, lim)
				} else {
					checkRestore[algorithm.SlidingWindow](t, lim)
				}
			case sluice.TokenBucket:
				checkRestore[algorithm.TokenBucket](t, lim)
			case sluice.FixedWindow:
				checkRestore[algorithm.FixedWindow](t, lim)
			case sluice.SlidingLog:
				checkRestore[algorithm.SlidingLog](t, lim)
			case sluice.LeakyBucket:
				checkRestore[algorithm.LeakyBucket](t, lim)
			}
		})
	}
}

func checkRestore[S any, P algorithm.State[S]](t *testing.T, lim sluice.Limit) {
	summary, restore := evictionFuncs[S]()
	rng := rand.New(rand.NewPCG(5, uint64(lim.Rate)))
	p := int64(lim.Period)
	prepared := P(nil).Prepare(lim)
	type spend struct {
		at   int64
		cost int
	}
	for trial := range 300 {
		var spends []spend
		now := int64(1_700_000_000e9) + rng.Int64N(p)
		for range 1 + rng.IntN(12) {
			now += rng.Int64N(p / 8)
			spends = append(spends, spend{now, 1 + rng.IntN(3)})
		}
		now += rng.Int64N(p / 4)
		// evicted replays the spends: a fresh copy of the evicted state
		// (a sliding log's ring is not shared by a value copy).
		evicted := func() *S {
			var st S
			for _, s := range spends {
				P(&st).Take(s.at, lim, s.cost)
			}
			return &st
		}
		if P(evicted()).Expires() <= now {
			continue // fresh: an eviction remembers nothing
		}
		until, units := summary(evicted())
		restored := func() *S {
			var st S
			restore(&st, now, lim, prepared, until, units)
			return &st
		}
		for at := now; at < now+3*p; at += 1 + rng.Int64N(p/16) {
			for _, c := range []int{1, 2, lim.Capacity() / 2, lim.Capacity()} {
				o, b := evicted(), restored()
				if ro, rb := P(o).Take(at, lim, c), P(b).Take(at, lim, c); rb.Allowed && !ro.Allowed {
					t.Fatalf("trial %d: at +%v the restored state admits %d where the evicted one refuses (%+v; restored from until +%v, units %d: %+v)",
						trial, time.Duration(at-now), c, *evicted(), time.Duration(until-now), units, *restored())
				}
			}
		}
	}
}
