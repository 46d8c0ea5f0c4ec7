package memstore_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/memstore"
)

// decision is one AllowN of cost 1 on the coarse store: when (on the exact
// clock) and what it answered.
type decision struct {
	at  int64
	res sluice.Result
}

// runCoarse drives a store on a manually ticked coarse clock over a fake
// clock: random steps of time, a tick whenever a resolution r has passed
// since the last one (the publishing goroutine's promise) and at random
// earlier, and a decision of cost 1 on one key after each step.
func runCoarse(t *rapid.T, lim sluice.Limit, r time.Duration) []decision {
	clock := clocktest.New()
	s, tick := memstore.NewManualCoarse(memstore.Config{Clock: clock, SweepInterval: -1})
	defer s.Close()
	lastTick := clock.Now()
	steps := rapid.IntRange(1, 300).Draw(t, "steps")
	out := make([]decision, 0, steps)
	for range steps {
		step := time.Duration(rapid.Int64Range(0, int64(3*r)).Draw(t, "step"))
		for step > 0 {
			room := lastTick.Add(r).Sub(clock.Now())
			if step < room {
				clock.Advance(step)
				break
			}
			clock.Advance(room)
			step -= room
			tick()
			lastTick = clock.Now()
		}
		if rapid.Bool().Draw(t, "early tick") {
			tick()
			lastTick = clock.Now()
		}
		res, err := s.AllowN(context.Background(), "k", lim, 1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decision{clock.Now().UnixNano(), res})
	}
	return out
}

// drawCoarseLimit draws a resolution and a limit of the algorithm whose
// period spans a few resolutions to a few hundred.
func drawCoarseLimit(t *rapid.T, a sluice.Algorithm) (sluice.Limit, time.Duration) {
	r := time.Duration(rapid.Int64Range(int64(10*time.Microsecond), int64(time.Millisecond)).Draw(t, "resolution"))
	period := time.Duration(rapid.Int64Range(int64(r), int64(300*r)).Draw(t, "period"))
	rate := rapid.IntRange(1, 40).Draw(t, "rate")
	return sluice.Limit{Algorithm: a, Rate: rate, Period: period, Burst: rapid.IntRange(1, 20).Draw(t, "burst")}, r
}

// A refused unit is admitted at most one resolution after the instant its
// RetryAfter named, if nothing was admitted meanwhile: a token bucket's
// refill and a fixed window's reset are at most one resolution late.
func checkAtMostOneResolutionLate(t *rapid.T, ds []decision, r time.Duration) {
	for i, d := range ds {
		if d.res.Allowed {
			continue
		}
		due := d.at + int64(d.res.RetryAfter) + int64(r)
		for _, e := range ds[i+1:] {
			if e.res.Allowed {
				break
			}
			if e.at >= due {
				t.Fatalf("refused at %d with RetryAfter %v, still refused at %d, more than %v later", d.at, d.res.RetryAfter, e.at, r)
			}
		}
	}
}

// TestCoarseTokenBucketBound: over any span L of real time, a token bucket
// on a coarse clock of resolution r admits at most Burst + ⌊(L+r)/T⌋ units
// (what the exact clock admits over L+r), and refills at most r late.
func TestCoarseTokenBucketBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim, r := drawCoarseLimit(t, sluice.TokenBucket)
		ds := runCoarse(t, lim, r)
		T := algorithm.Interval(lim)
		for i := range ds {
			admitted := int64(0)
			for j := i; j < len(ds); j++ {
				if ds[j].res.Allowed {
					admitted++
				}
				span := ds[j].at - ds[i].at
				if bound := int64(lim.Burst) + (span+int64(r))/T; admitted > bound {
					t.Fatalf("%d admitted in %v (decisions %d..%d), bound %d (burst %d, interval %v, resolution %v)",
						admitted, time.Duration(span), i, j, bound, lim.Burst, time.Duration(T), r)
				}
			}
		}
		checkAtMostOneResolutionLate(t, ds, r)
	})
}

// TestCoarseFixedWindowBound: a fixed window on a coarse clock of
// resolution r admits at most Rate within each window of real time less its
// first r (the reading there is in that window), and resets at most r late.
func TestCoarseFixedWindowBound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lim, r := drawCoarseLimit(t, sluice.FixedWindow)
		ds := runCoarse(t, lim, r)
		p := int64(lim.Period)
		perWindow := map[int64]int{}
		for _, d := range ds {
			start := d.at - d.at%p
			if d.res.Allowed && d.at >= start+int64(r) {
				perWindow[start]++
				if perWindow[start] > lim.Rate {
					t.Fatalf("%d admitted in the window from %d after its first %v, rate %d", perWindow[start], start, r, lim.Rate)
				}
			}
		}
		checkAtMostOneResolutionLate(t, ds, r)
	})
}

// The coarse clock's goroutine moves the reading on its own: a store with a
// ClockResolution over a fake clock sees the fake clock's advance without
// a tick from the test (waiting for the real goroutine, with a deadline).
// After Close, decisions read the exact clock at once.
func TestCoarseClockRunsAndStopsWithTheStore(t *testing.T) {
	clock := clocktest.New()
	s := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1, ClockResolution: memstore.MinClockResolution})
	ctx := context.Background()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: time.Minute}
	if _, err := s.AllowN(ctx, "k", lim, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	storetest.WaitFor(t, "the coarse clock to publish the fake clock's new minute", func() bool {
		res, err := s.AllowN(ctx, "k", lim, 1)
		if err != nil {
			t.Fatal(err)
		}
		return res.Allowed
	})
	s.Close()
	clock.Advance(time.Minute)
	if res, err := s.AllowN(ctx, "k", lim, 1); err != nil || !res.Allowed {
		t.Fatalf("after Close: %+v, %v; want admitted in the next minute on the exact clock", res, err)
	}
}

// A decision on a held key allocates nothing on the coarse clock either.
func TestNoAllocsOnHeldKeyCoarse(t *testing.T) {
	for _, a := range []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow, sluice.SlidingWindow, sluice.LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			s := newTestStore(t, memstore.Config{ClockResolution: 100 * time.Microsecond})
			lim := sluice.Limit{Algorithm: a, Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}
			ctx := context.Background()
			mustAllow(t, s, "user:42", lim, 1)
			allocs := testing.AllocsPerRun(1000, func() {
				if _, err := s.AllowN(ctx, "user:42", lim, 1); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("AllowN on a held key, coarse clock: %v allocs per call, want 0", allocs)
			}
		})
	}
}

// sameLimit tells limits apart by every field, as == does: a limit that
// differs from the shard's last in any one field is validated afresh.
func TestSameLimitSeesEveryField(t *testing.T) {
	base := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Hour, Burst: 3,
		Calendar: sluice.Calendar{Location: time.UTC, Unit: sluice.CalendarDay}}
	variants := []func(*sluice.Limit){
		func(l *sluice.Limit) { l.Algorithm = sluice.SlidingWindow },
		func(l *sluice.Limit) { l.Rate++ },
		func(l *sluice.Limit) { l.Period++ },
		func(l *sluice.Limit) { l.Burst++ },
		func(l *sluice.Limit) { l.CountRejected = true },
		func(l *sluice.Limit) { l.Buckets = 2 },
		func(l *sluice.Limit) { l.Moments = 2 },
		func(l *sluice.Limit) { l.Calendar.Location = time.Local },
		func(l *sluice.Limit) { l.Calendar.Unit = sluice.CalendarWeek },
		func(l *sluice.Limit) { l.Calendar.FirstWeekday++ },
		func(l *sluice.Limit) { l.Calendar.AnchorDay++ },
		func(l *sluice.Limit) { l.Calendar.AnchorMonth++ },
		func(l *sluice.Limit) { l.Precision = time.Second },
	}
	if !memstore.SameLimit(base, base) {
		t.Fatal("a limit differs from itself")
	}
	for i, change := range variants {
		l := base
		change(&l)
		if memstore.SameLimit(base, l) {
			t.Errorf("variant %d (%+v) compares equal to %+v", i, l, base)
		}
	}
	// A field added to Limit or Calendar must be compared too: this count
	// fails until sameLimit and the variants above are looked at. Billable
	// is the one field left out: it changes no decision, and a store
	// without a ledger ignores it.
	if n := reflect.TypeFor[sluice.Limit]().NumField() + reflect.TypeFor[sluice.Calendar]().NumField() - 2; n != len(variants) {
		t.Errorf("Limit and Calendar have %d fields, the test varies %d", n, len(variants))
	}
}

// ClockResolution reports the resolution in force: the configured one,
// raised to MinClockResolution, while the goroutine runs; 0 without one or
// after Close.
func TestClockResolutionReportsTheClockInForce(t *testing.T) {
	exact := memstore.New(memstore.Config{SweepInterval: -1})
	defer exact.Close()
	if r := exact.ClockResolution(); r != 0 {
		t.Errorf("exact store: ClockResolution %v, want 0", r)
	}
	s := memstore.New(memstore.Config{SweepInterval: -1, ClockResolution: time.Nanosecond})
	if r := s.ClockResolution(); r != memstore.MinClockResolution {
		t.Errorf("ClockResolution %v, want %v (1ns raised)", r, memstore.MinClockResolution)
	}
	s.Close()
	if r := s.ClockResolution(); r != 0 {
		t.Errorf("after Close: ClockResolution %v, want 0", r)
	}
}
