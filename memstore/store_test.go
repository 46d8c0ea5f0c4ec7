package memstore_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// newTestStore returns a store configured by cfg but without a janitor (the
// tests sweep by hand), closed when the test ends.
func newTestStore(t *testing.T, cfg memstore.Config) *memstore.Store {
	t.Helper()
	cfg.SweepInterval = -1
	s := memstore.New(cfg)
	t.Cleanup(func() { s.Close() })
	return s
}

// mustAllow is AllowN on s that fails the test on an error, so that a check
// for a denial cannot pass on a bad input.
func mustAllow(t *testing.T, s *memstore.Store, key string, lim sluice.Limit, cost int) sluice.Result {
	t.Helper()
	r, err := s.AllowN(context.Background(), key, lim, cost)
	if err != nil {
		t.Fatalf("AllowN(%q, %v, %d): %v", key, lim, cost, err)
	}
	return r
}

func limits(n int) []sluice.Limit {
	var out []sluice.Limit
	for _, a := range sluice.Algorithms() {
		out = append(out, sluice.Limit{Algorithm: a, Rate: n, Period: time.Second, Burst: n})
	}
	return out
}

// Idle keys are dropped once their state is as good as fresh, and not before.
func TestSweepDropsIdleKeys(t *testing.T) {
	for _, lim := range limits(10) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			clock := clocktest.New()
			s := newTestStore(t, memstore.Config{Clock: clock})
			for i := range 100 {
				mustAllow(t, s, "k"+strconv.Itoa(i), lim, 3)
			}
			if got := s.Len(); got != 100 {
				t.Fatalf("Len = %d after 100 keys, want 100", got)
			}
			clock.Advance(100 * time.Millisecond)
			if d := s.Sweep(); d != 0 {
				t.Errorf("Sweep 100ms after use dropped %d keys, want 0", d)
			}
			// Two periods later every algorithm's state is fresh again.
			clock.Advance(2 * time.Second)
			if d := s.Sweep(); d != 100 {
				t.Errorf("Sweep after 2 periods dropped %d keys, want 100", d)
			}
			if got := s.Len(); got != 0 {
				t.Errorf("Len = %d after sweep, want 0", got)
			}
		})
	}
}

// A key dropped by the sweep behaves exactly like a key that was kept.
func TestSweepIsInvisible(t *testing.T) {
	for _, lim := range limits(5) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			clock := clocktest.New()
			swept := newTestStore(t, memstore.Config{Clock: clock})
			kept := newTestStore(t, memstore.Config{Clock: clock})
			ctx := context.Background()
			for step := range 400 {
				clock.Advance(time.Duration(step%7) * 97 * time.Millisecond)
				if step%5 == 0 {
					swept.Sweep()
				}
				cost := 1 + step%3
				a, err1 := swept.AllowN(ctx, "k", lim, cost)
				b, err2 := kept.AllowN(ctx, "k", lim, cost)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				if a != b {
					t.Fatalf("step %d: swept store %+v, kept store %+v", step, a, b)
				}
			}
		})
	}
}

// A flood of unique keys never grows the store beyond MaxKeys, for every
// algorithm, even when no key is idle yet, and eviction keeps it nearly full
// rather than emptying it. The bound is per shard, so a small MaxKeys
// flooded with 100 times as many keys (10 times for the algorithms other
// than the token bucket: the bound is the same code for every algorithm)
// exercises what a large one would, in a tenth of the time under -race.
// Every key evicted is remembered (none is idle), so the flood saturates
// the sketch of evicted keys: a fresh key is admitted while the sketch has
// merged none, and may start as spent as the keys merged after.
func TestKeyFloodStaysBounded(t *testing.T) {
	const maxKeys = 1024 // 64 per shard
	flood := 100 * maxKeys
	if testing.Short() {
		flood = 10 * maxKeys
	}
	for _, lim := range limits(10) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			s := newTestStore(t, memstore.Config{Clock: clocktest.New(), MaxKeys: maxKeys, Shards: 16})
			ctx := context.Background()
			keys := flood
			if lim.Algorithm != sluice.TokenBucket {
				keys = flood / 10
			}
			for i := range keys {
				r, err := s.AllowN(ctx, "flood:"+strconv.Itoa(i), lim, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Allowed && s.Stats().Merged == 0 {
					t.Fatalf("key %d: a fresh key was denied, and the sketch of evicted keys has merged none", i)
				}
				if i%maxKeys == 0 {
					if l := s.Len(); l > maxKeys {
						t.Fatalf("after %d keys Len = %d > MaxKeys %d", i+1, l, maxKeys)
					}
				}
			}
			if l := s.Len(); l > maxKeys || l < maxKeys*9/10 {
				t.Errorf("after %d keys Len = %d, want close to and at most %d", keys, l, maxKeys)
			}
			if st := s.Stats(); st.Evictions < uint64(keys-maxKeys) {
				t.Errorf("after %d keys %d evictions, want at least %d: keys left some other way", keys, st.Evictions, keys-maxKeys)
			}
		})
	}
}

// When the store is full, it evicts a key that is fresh (or nearest to it)
// rather than one that is limited.
func TestEvictionPrefersIdleKeys(t *testing.T) {
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock, MaxKeys: 64, Shards: 1})
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 2, Period: time.Hour}
	short := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 2, Period: time.Second}
	// One limited key with a long window...
	mustAllow(t, s, "limited", lim, 2)
	// ...and many keys whose windows end sooner.
	for i := range 63 {
		mustAllow(t, s, "idle"+strconv.Itoa(i), short, 1)
	}
	clock.Advance(2 * time.Second)
	for i := range 200 {
		mustAllow(t, s, "new"+strconv.Itoa(i), short, 1)
	}
	if r := mustAllow(t, s, "limited", lim, 1); r.Allowed {
		t.Errorf("the limited key was evicted: it was admitted again within its window")
	}
	if l := s.Len(); l > 64 {
		t.Errorf("Len = %d > 64", l)
	}
}

// A decision on a key the store holds allocates nothing.
func TestNoAllocsOnHeldKey(t *testing.T) {
	for _, lim := range limits(1 << 20) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			if lim.Algorithm == sluice.SlidingLog {
				// A small log, filled to its full ring before measuring:
				// the ring grows by doubling until it holds Rate entries.
				// One unit leaves the window per step as one comes in.
				lim.Rate, lim.Period = 256, 256*time.Microsecond
			}
			clock := clocktest.New()
			s := newTestStore(t, memstore.Config{Clock: clock})
			ctx := context.Background()
			key := "user:42"
			// A few hundred calls hold the key; the log needs 2·Rate of
			// them to fill its ring (2·1M calls for the others cost 10 s
			// under -race and covered nothing more: every call admits).
			for range 2 * min(lim.Rate, 256) {
				clock.Advance(time.Microsecond)
				if _, err := s.AllowN(ctx, key, lim, 1); err != nil {
					t.Fatal(err)
				}
			}
			allocs := testing.AllocsPerRun(1000, func() {
				clock.Advance(time.Microsecond)
				if _, err := s.AllowN(ctx, key, lim, 1); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("AllowN on a held key: %v allocs per call, want 0", allocs)
			}
		})
	}
}

// A decision that creates a key of up to 19 bytes allocates nothing: the
// table holds such a key in its slot rather than a clone of it (the slot
// arrays' growth, a few times per table, averages out over 2,000 keys).
func TestNoAllocsOnNewShortKey(t *testing.T) {
	for _, a := range []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow, sluice.LeakyBucket} {
		t.Run(a.String(), func(t *testing.T) {
			s := newTestStore(t, memstore.Config{Clock: clocktest.New()})
			lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Second, Burst: 10}
			ctx := context.Background()
			keys := make([]string, 2001)
			for i := range keys {
				keys[i] = fmt.Sprintf("user:%014d", i) // 19 bytes
			}
			i := 0
			allocs := testing.AllocsPerRun(len(keys)-1, func() {
				if _, err := s.AllowN(ctx, keys[i], lim, 1); err != nil {
					t.Fatal(err)
				}
				i++
			})
			if allocs != 0 {
				t.Errorf("AllowN on a new 19-byte key: %v allocs per call, want 0", allocs)
			}
			if n := s.Len(); n != len(keys) {
				t.Fatalf("store holds %d keys, want %d", n, len(keys))
			}
		})
	}
}

// Close stops the janitor; goleak in TestMain catches a leak. Close twice
// is harmless.
func TestCloseIdempotent(t *testing.T) {
	s := memstore.New(memstore.Config{SweepInterval: time.Millisecond})
	runtime.Gosched()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
