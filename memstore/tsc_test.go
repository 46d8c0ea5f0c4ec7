package memstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// fakeCounter is a machine for the counter clock: true time (elapsed) in
// nanoseconds, a counter that ticks at num/den ticks per nanosecond from
// an offset that a restored virtual machine may move, and a monotonic clock
// slewed by ppm (by ppm2 from true time slewAt on, if that is not 0) whose
// every read takes some true time, drawn by t or else by rnd.
type fakeCounter struct {
	t         *rapid.T
	rnd       *rand.Rand
	elapsed   int64
	num, den  int64
	offset    int64
	ppm       int64
	slewAt    int64
	ppm2      int64
	monoCalls int
	lastMono  int64
	readMaxNS int64
}

func (f *fakeCounter) counter() int64 { return f.offset + f.elapsed*f.num/f.den }

func (f *fakeCounter) monoAt(tr int64) int64 {
	if f.slewAt == 0 || tr <= f.slewAt {
		return 1e18 + tr + tr*f.ppm/1_000_000
	}
	d := tr - f.slewAt
	return f.monoAt(f.slewAt) + d + d*f.ppm2/1_000_000
}

func (f *fakeCounter) mono() int64 {
	if f.t != nil {
		f.elapsed += rapid.Int64Range(0, f.readMaxNS).Draw(f.t, "read")
	} else {
		f.elapsed += f.rnd.Int64N(f.readMaxNS + 1)
	}
	f.monoCalls++
	f.lastMono = f.monoAt(f.elapsed)
	return f.lastMono
}

// The counter clock's reading stays within maxPairNS/2 plus the rate's
// error over a span (maxPairNS·spanNS/calibrationNS), plus rounding, of the monotonic
// clock's at the same instant, whatever the counter's frequency, the
// kernel's slew, the pauses between decisions and the reads that take too
// long to pair; a reading it cannot vouch for is the monotonic clock's own.
// A counter that jumps (a restored virtual machine) is caught by the next
// anchor and the clock calibrates afresh.
func TestTSCClockWithinBoundOfMonotonic(t *testing.T) {
	// Plus 4 ns of rounding: a tick of the slowest counter drawn (2 ns),
	// the fixed point's truncation, the midpoint's.
	bound := memstore.TSCMaxPairNS/2 + memstore.TSCMaxPairNS*memstore.TSCSpanNS/memstore.TSCCalibrationNS + 4
	extrapolated, readings := 0, 0
	rapid.Check(t, func(t *rapid.T) {
		f := &fakeCounter{
			t:         t,
			num:       rapid.Int64Range(500, 5000).Draw(t, "MHz"),
			den:       1000,
			offset:    rapid.Int64Range(0, 1<<50).Draw(t, "offset"),
			ppm:       rapid.Int64Range(-500, 500).Draw(t, "ppm"),
			readMaxNS: rapid.Int64Range(10, 3000).Draw(t, "readMaxNS"),
		}
		c := memstore.NewTSCClock(f.counter, f.mono)
		lastJump := int64(-10 * time.Second)
		for i := range 800 {
			// rapid draws small values more often than large: the rare
			// kinds are at the top of the range.
			switch k := rapid.IntRange(0, 299).Draw(t, "kind"); {
			case k == 299: // a long pause
				f.elapsed += rapid.Int64Range(0, int64(3*time.Second)).Draw(t, "pause")
			case k == 298 && f.elapsed-lastJump >= int64(10*time.Second):
				// The counter jumps by more than a span of ticks, at
				// most once in 10 s: two jumps within one calibration
				// that scale with its two passes would pass for a rate
				// (until the next anchor, a span later; see tsc.go).
				lastJump = f.elapsed
				j := rapid.Int64Range(2*memstore.TSCSpanNS, int64(100*time.Second)).Draw(t, "jump")
				if rapid.Bool().Draw(t, "back") {
					j = -j
				}
				f.offset += j * f.num / f.den
			case k >= 290: // a step past the span
				f.elapsed += rapid.Int64Range(0, 2*memstore.TSCSpanNS).Draw(t, "step")
			default:
				f.elapsed += rapid.Int64Range(memstore.TSCSpanNS/20, memstore.TSCSpanNS/4).Draw(t, "small step")
			}
			readings++
			calls, at := f.monoCalls, f.elapsed
			got := c.At(f.counter())
			if f.monoCalls != calls {
				if got != f.lastMono {
					t.Fatalf("step %d: a reading that read the monotonic clock = %d, want its %d", i, got, f.lastMono)
				}
				continue
			}
			extrapolated++
			if want := f.monoAt(at); got-want > bound || want-got > bound {
				t.Fatalf("step %d: reading %d, monotonic %d: off by %d ns, bound %d", i, got, want, got-want, bound)
			}
		}
	})
	if extrapolated == 0 {
		t.Fatalf("none of %d readings came from the counter: the bound was never checked", readings)
	}
	t.Logf("%d of %d readings from the counter", extrapolated, readings)
}

// TestTSCClockFollowsTheKernelsSlewChange: when NTP changes the kernel's
// rate (here from 0 to ±1% after 3 s, chrony slews up to 8.3%), the anchor
// after the change finds its prediction off and the clock calibrates
// afresh, so that from two spans after the change every reading is within
// the bound of TestTSCClockWithinBoundOfMonotonic again; before that, one
// span's extrapolation at the old rate errs by the change over it.
func TestTSCClockFollowsTheKernelsSlewChange(t *testing.T) {
	bound := memstore.TSCMaxPairNS/2 + memstore.TSCMaxPairNS*memstore.TSCSpanNS/memstore.TSCCalibrationNS + 4
	for _, tc := range []struct{ mhz, ppm2 int64 }{{3000, 10_000}, {3000, -10_000}, {1000, 10_000}, {2400, 83_333}} {
		t.Run(fmt.Sprintf("%dMHz_%+dppm", tc.mhz, tc.ppm2), func(t *testing.T) {
			f := &fakeCounter{
				rnd:       rand.New(rand.NewPCG(uint64(tc.mhz), uint64(tc.ppm2))),
				num:       tc.mhz,
				den:       1000,
				slewAt:    int64(3 * time.Second),
				ppm2:      tc.ppm2,
				readMaxNS: 300,
			}
			c := memstore.NewTSCClock(f.counter, f.mono)
			grace := f.slewAt + 2*memstore.TSCSpanNS
			var worst, worstAt int64
			extrapolated := 0
			for f.elapsed < int64(6*time.Second) {
				f.elapsed += f.rnd.Int64N(memstore.TSCSpanNS / 2)
				calls, at := f.monoCalls, f.elapsed
				got := c.At(f.counter())
				if f.monoCalls != calls {
					continue
				}
				extrapolated++
				off := got - f.monoAt(at)
				if off < 0 {
					off = -off
				}
				if at > grace && off > worst {
					worst, worstAt = off, at
				}
			}
			if worst > bound {
				t.Fatalf("a reading %v after the slew changed is off by %d ns, bound %d", time.Duration(worstAt-f.slewAt), worst, bound)
			}
			t.Logf("%d readings from the counter; after the change, at worst off by %d ns", extrapolated, worst)
		})
	}
}

// A store reads its clock within the counter clock's bound of the
// monotonic clock (checked against time.Now read before and after: a
// preemption between the reads only widens the interval), from four
// goroutines at once, so that anchors are taken while others read.
func TestStoreDefaultClockWithinBoundOfMonotonic(t *testing.T) {
	s := newTestStore(t, memstore.Config{})
	if !memstore.UsesTSC(s) {
		t.Skip("the kernel does not keep time with the CPU's counter here: the store reads the monotonic clock")
	}
	const bound = 600
	deadline := time.Now().Add(50 * time.Millisecond)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for n := 0; time.Now().Before(deadline); n++ {
				a := time.Now().UnixNano()
				got := memstore.Now(s)
				b := time.Now().UnixNano()
				if got < a-bound || got > b+bound {
					errs <- fmt.Errorf("reading %d: %d, outside [%d, %d] ± %d ns", n, got, a, b, bound)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A store made in a testing/synctest bubble follows the bubble's fake
// clock, not the CPU's counter (which would not move while the bubble's
// clock does).
func TestStoreInSynctestBubbleFollowsItsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newTestStore(t, memstore.Config{})
		lim := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1, Period: time.Hour, Burst: 1}
		if !mustAllow(t, s, "k", lim, 1).Allowed {
			t.Fatal("first decision refused")
		}
		if mustAllow(t, s, "k", lim, 1).Allowed {
			t.Fatal("second decision admitted before the hour passed")
		}
		time.Sleep(time.Hour) // the bubble's clock: no real time passes
		if !mustAllow(t, s, "k", lim, 1).Allowed {
			t.Fatal("refused after the bubble's hour: the store did not follow the bubble's clock")
		}
	})
}

// A step of an injected Clock is a step of the store's time: a bucket spent
// before the clock steps back an hour stays spent (the token bucket keeps
// the later of its TAT and now), and a step forward refills it as an hour
// passing would. The default clock never sees a step of the wall clock
// after New (it is monotonic; see Config.Clock).
func TestInjectedClockStepBackKeepsBucketSpent(t *testing.T) {
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock})
	lim := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 2, Period: time.Minute, Burst: 2}
	for i := range 2 {
		if !mustAllow(t, s, "k", lim, 1).Allowed {
			t.Fatalf("decision %d of the burst refused", i)
		}
	}
	clock.Advance(-time.Hour)
	if r := mustAllow(t, s, "k", lim, 1); r.Allowed {
		t.Fatalf("after a step back of an hour: admitted (%+v), want refused", r)
	}
	clock.Advance(2 * time.Hour)
	if !mustAllow(t, s, "k", lim, 1).Allowed {
		t.Fatal("after a step forward of an hour past the spend: refused, want admitted")
	}
}

// A decision on a held key allocates nothing on the default clock, the
// counter clock's anchors included.
func TestNoAllocsOnHeldKeyDefaultClock(t *testing.T) {
	s := newTestStore(t, memstore.Config{})
	lim := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}
	ctx := context.Background()
	mustAllow(t, s, "user:42", lim, 1)
	allocs := testing.AllocsPerRun(20000, func() {
		if _, err := s.AllowN(ctx, "user:42", lim, 1); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("AllowN on a held key, default clock: %v allocs per call, want 0", allocs)
	}
}

// TestInjectedClockStepBackAcrossABoundaryForgetsNothing: a clock that
// steps back 300 ns across a window's boundary, as readings taken before
// the shard lock by goroutines racing for a hot key do, must not make a
// sliding window forget the previous window. 100/s, 100 spent in the last
// half second of a window, then readings around the boundary and one a
// millisecond on until 0.2 s past it: the 100 weigh 100·(1−e) there, so
// about 20 fit, with or without the step back.
func TestInjectedClockStepBackAcrossABoundaryForgetsNothing(t *testing.T) {
	lim := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 100, Period: time.Second}
	admitted := func(steps []time.Duration) int {
		w := clocktest.Epoch.Add(time.Second) // a window's boundary
		clock := clocktest.At(w.Add(-500 * time.Millisecond))
		s := newTestStore(t, memstore.Config{Clock: clock})
		if !mustAllow(t, s, "k", lim, 100).Allowed {
			t.Fatal("100 of 100 at W−0.5s refused")
		}
		n := 0
		for _, at := range steps {
			clock.Set(w.Add(at))
			if mustAllow(t, s, "k", lim, 1).Allowed {
				n++
			}
		}
		for at := time.Millisecond; at < 200*time.Millisecond; at += time.Millisecond {
			clock.Set(w.Add(at))
			if mustAllow(t, s, "k", lim, 1).Allowed {
				n++
			}
		}
		return n
	}
	forward := admitted([]time.Duration{300, 300, 1000})
	back := admitted([]time.Duration{300, -300, 1000})
	if forward > 20 || back > forward {
		t.Fatalf("admitted %d in [W, W+0.2s) with the clock going forward and %d with a 300 ns step back, want at most 20 and no more than forward", forward, back)
	}
	t.Logf("admitted %d going forward, %d with the step back", forward, back)
}
