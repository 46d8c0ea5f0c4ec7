package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// RunCounterToMoments checks that a key spent under the two-window counter
// (buckets 1, no moments) and then decided under moments, as when a
// sliding_window rule is reloaded with the config's default of buckets 16,
// moments 2, comes back as spent as the counter counted it: refused at
// once and for the rest of the period, and admitted again, whole, once the
// units counted have left the period. A store that started the key afresh
// would admit 10 at once.
func RunCounterToMoments(t *testing.T, newStore NewStore) {
	clock := clocktest.New()
	store := newStore(t, clock)
	key := keyOf(t)
	counter := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute}
	moments := counter
	moments.Buckets, moments.Moments = 16, 2

	// 6 units 50 s into a window, 5 more 10 s into the next: the counter
	// counts ⌊6·50/60⌋ + 5 = 10, the rate.
	clock.Set(clock.Now().Truncate(time.Minute).Add(time.Minute + 50*time.Second))
	if r := allow(t, store, key, counter, 6); !r.Allowed {
		t.Fatalf("counter: AllowN(6) = %+v, want admitted", r)
	}
	clock.Advance(20 * time.Second)
	if r := allow(t, store, key, counter, 5); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("counter: AllowN(5) = %+v, want admitted with 0 left", r)
	}

	// The rule reloaded: moments count what the counter counted.
	reload := clock.Now()
	if p, ok := store.(sluice.Peeker); ok {
		if r, err := p.Peek(context.Background(), key, moments); err != nil || r.Remaining != 0 {
			t.Fatalf("moments, at once: Peek = %+v, %v; want 0 left (the counter counted 10 of 10)", r, err)
		}
	}
	if r := allow(t, store, key, moments, 1); r.Allowed {
		t.Fatalf("moments, at once: AllowN(1) = %+v, want refused (the counter counted 10 of 10)", r)
	}
	for _, after := range []time.Duration{30 * time.Second, 59 * time.Second} {
		clock.Set(reload.Add(after))
		if r := allow(t, store, key, moments, 1); r.Allowed {
			t.Fatalf("moments, %v after the reload: AllowN(1) = %+v, want refused: the units counted stay inside the period", after, r)
		}
	}
	// The reload came 2.5 s into a 3.75 s sub-window: its units leave the
	// period 61.25 s after the reload.
	clock.Set(reload.Add(61250 * time.Millisecond))
	if r := allow(t, store, key, moments, 10); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("moments, 61.25 s after the reload: AllowN(10) = %+v, want admitted with 0 left: nothing counted before weighs", r)
	}
}

// RunMomentsToCounter checks the way back: a key spent under moments and
// then decided under the two-window counter (a rule reloaded with
// buckets: 1, opting out of the default) keeps every unit: refused until
// the counter's window ends, then counted as the previous window's, fading
// over the next one, and admitted whole once that has passed.
func RunMomentsToCounter(t *testing.T, newStore NewStore) {
	clock := clocktest.New()
	store := newStore(t, clock)
	key := keyOf(t)
	counter := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute}
	moments := counter
	moments.Buckets, moments.Moments = 16, 2

	w := clock.Now().Truncate(time.Minute).Add(time.Minute)
	clock.Set(w.Add(10 * time.Second))
	if r := allow(t, store, key, moments, 10); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("moments: AllowN(10) = %+v, want admitted with 0 left", r)
	}
	clock.Set(w.Add(11 * time.Second))
	if p, ok := store.(sluice.Peeker); ok {
		if r, err := p.Peek(context.Background(), key, counter); err != nil || r.Remaining != 0 {
			t.Fatalf("counter, at once: Peek = %+v, %v; want 0 left (moments counted 10 of 10)", r, err)
		}
	}
	if r := allow(t, store, key, counter, 1); r.Allowed {
		t.Fatalf("counter, at once: AllowN(1) = %+v, want refused (moments counted 10 of 10)", r)
	}
	clock.Set(w.Add(59 * time.Second))
	if r := allow(t, store, key, counter, 1); r.Allowed {
		t.Fatalf("counter, 59 s into the window: AllowN(1) = %+v, want refused", r)
	}
	// Half the next window gone: ⌊10·30/60⌋ = 5 still weigh.
	clock.Set(w.Add(90 * time.Second))
	if r := allow(t, store, key, counter, 5); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("counter, 90 s: AllowN(5) = %+v, want admitted with 0 left (5 of the 10 still weigh)", r)
	}
	clock.Set(w.Add(180 * time.Second))
	if r := allow(t, store, key, counter, 10); !r.Allowed {
		t.Fatalf("counter, 180 s: AllowN(10) = %+v, want admitted: nothing counted before weighs", r)
	}
}

// RunStaleMomentsToCounter checks that a key moved from moments to the
// two-window counter brings only the units moments still count at the
// move: 10 units spent at the start of a sub-window, read under the
// counter a period and half a sub-window later, when moments count none
// of them (their sub-window is half out of the period and they all came
// at its start), come back with all 10 to spend, not refused for up to two
// more periods as if the expired units still weighed.
func RunStaleMomentsToCounter(t *testing.T, newStore NewStore) {
	clock := clocktest.New()
	store := newStore(t, clock)
	key := keyOf(t)
	counter := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: 16 * time.Second}
	moments := counter
	moments.Buckets, moments.Moments = 16, 2

	w := clock.Now().Truncate(time.Minute).Add(time.Minute)
	clock.Set(w)
	if r := allow(t, store, key, moments, 10); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("moments: AllowN(10) = %+v, want admitted with 0 left", r)
	}
	clock.Set(w.Add(16*time.Second + 500*time.Millisecond))
	if p, ok := store.(sluice.Peeker); ok {
		if r, err := p.Peek(context.Background(), key, moments); err != nil || r.Remaining != 10 {
			t.Fatalf("moments, 16.5 s: Peek = %+v, %v; want 10 left (the units came at the start of a sub-window half out of the period)", r, err)
		}
		if r, err := p.Peek(context.Background(), key, counter); err != nil || r.Remaining != 10 {
			t.Fatalf("counter, 16.5 s: Peek = %+v, %v; want 10 left, as moments count", r, err)
		}
	}
	if r := allow(t, store, key, counter, 10); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("counter, 16.5 s: AllowN(10) = %+v, want admitted with 0 left: moments count none of the old units", r)
	}
}
