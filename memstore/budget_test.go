package memstore_test

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/algorithm"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// longKey returns a key of sluice.MaxKeyLen bytes that ends in i.
func longKey(i int) string {
	tail := strconv.Itoa(i)
	return strings.Repeat("x", sluice.MaxKeyLen-len(tail)) + tail
}

// A flood of the longest keys never takes the store past MaxBytes, for any
// algorithm, and the store keeps using its budget rather than emptying.
func TestLongKeyFloodStaysWithinMaxBytes(t *testing.T) {
	const maxBytes = 1 << 20
	for _, lim := range limits(10) {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			s := newTestStore(t, memstore.Config{Clock: clocktest.New(), MaxBytes: maxBytes, Shards: 4})
			const n = 2000 // 8 MB of keys asked for
			for i := range n {
				if r := mustAllow(t, s, longKey(i), lim, 1); !r.Allowed {
					t.Fatalf("key %d: a fresh key was denied", i)
				}
				if i%100 == 0 {
					if st := s.Stats(); st.Bytes > maxBytes {
						t.Fatalf("after %d keys Stats().Bytes = %d > MaxBytes %d", i+1, st.Bytes, maxBytes)
					}
				}
			}
			st := s.Stats()
			if st.Bytes > maxBytes || st.Bytes < maxBytes/2 {
				t.Errorf("Stats().Bytes = %d, want close to and at most %d", st.Bytes, maxBytes)
			}
			if st.Keys != s.Len() || st.Keys < maxBytes/(2*sluice.MaxKeyLen) {
				t.Errorf("Stats().Keys = %d (Len %d), want about %d", st.Keys, s.Len(), maxBytes/sluice.MaxKeyLen)
			}
			if st.Evictions != uint64(n-st.Keys) {
				t.Errorf("Stats().Evictions = %d, want %d (keys asked for, minus keys held)", st.Evictions, n-st.Keys)
			}
			if st.MaxBytes != maxBytes || st.MaxKeys != memstore.DefaultMaxKeys {
				t.Errorf("Stats() bounds = %d bytes, %d keys; want %d, %d", st.MaxBytes, st.MaxKeys, maxBytes, memstore.DefaultMaxKeys)
			}
		})
	}
}

// The bytes the store says it holds are the bytes it holds: the heap grows
// by Stats().Bytes, within a small factor, for short keys (where slots
// dominate) and for long ones (where key bytes do).
func TestStatsBytesMatchHeap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		key      func(int) string
		maxBytes int64
		n        int
	}{
		{"16-byte keys", func(i int) string { return "user:" + strconv.Itoa(1e10+i) }, 1 << 20, 25_000},
		{"4KB keys", longKey, 4 << 20, 2000},
	} {
		for _, lim := range limits(10) {
			t.Run(tc.name+"/"+lim.Algorithm.String(), func(t *testing.T) {
				before := heapAfterGC()
				s := memstore.New(memstore.Config{Clock: clocktest.New(), MaxBytes: tc.maxBytes, SweepInterval: -1})
				ctx := context.Background()
				for i := range tc.n {
					if _, err := s.AllowN(ctx, tc.key(i), lim, 1); err != nil {
						t.Fatal(err)
					}
				}
				after := heapAfterGC()
				st := s.Stats()
				s.Close()
				heap := int64(after) - int64(before)
				if st.Evictions == 0 {
					t.Fatalf("no evictions: %d keys fit in %d bytes, the test did not reach the budget", tc.n, tc.maxBytes)
				}
				ratio := float64(heap) / float64(st.Bytes)
				t.Logf("%d keys: Stats().Bytes %d, heap grew %d (%.2f×)", st.Keys, st.Bytes, heap, ratio)
				if ratio < 0.75 || ratio > 1.5 {
					t.Errorf("heap grew %d bytes for Stats().Bytes %d (%.2f×); want within 0.75–1.5×", heap, st.Bytes, ratio)
				}
			})
		}
	}
}

// Sliding logs that grow in place past the budget evict other keys, not
// themselves: the store stays within MaxBytes, and a full log keeps
// denying.
func TestGrowingSlidingLogsStayWithinMaxBytes(t *testing.T) {
	const maxBytes = 64 << 10
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock, MaxBytes: maxBytes, Shards: 1})
	small := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Minute}
	// Fill the shard up to its budget: the first eviction says it is full.
	// Then let the small keys go idle, so that the logs evict them first
	// and the sketch of evicted keys remembers only logs.
	for i := 0; s.Stats().Evictions == 0; i++ {
		mustAllow(t, s, "small"+strconv.Itoa(i), small, 1)
	}
	clock.Advance(small.Period)
	log := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: algorithm.LogEntries, Period: time.Hour}
	// Units at distinct instants are distinct entries: each log grows to
	// LogEntries of them, about 1 KB; 100 logs are more than the budget.
	for j := range 100 {
		key := "log" + strconv.Itoa(j)
		for range log.Rate {
			clock.Advance(time.Microsecond)
			if r := mustAllow(t, s, key, log, 1); !r.Allowed {
				t.Fatalf("log %d denied within its rate", j)
			}
		}
		if st := s.Stats(); st.Bytes > maxBytes {
			t.Fatalf("after log %d grew: Bytes %d > MaxBytes %d", j, st.Bytes, maxBytes)
		}
		if r := mustAllow(t, s, key, log, 1); r.Allowed {
			t.Fatalf("log %d was evicted as it grew: a full log admitted again", j)
		}
	}
}

// Making room for one new key costs a bounded number of evictions, even when
// its table must grow and the budget is held by another algorithm's keys:
// a request's work is bounded by its bytes, not by the store's size.
func TestEvictionsPerNewKeyBounded(t *testing.T) {
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock, MaxBytes: 2 << 20, MaxKeys: math.MaxInt, Shards: 2})
	ctx := context.Background()
	idle := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 10, Period: time.Second}
	busy := sluice.PerHour(10)
	for i := range 60_000 { // about twice the budget
		if _, err := s.AllowN(ctx, "idle"+strconv.Itoa(i), idle, 1); err != nil {
			t.Fatal(err)
		}
	}
	const bound = 64 + 1 + 3 // roomEvictions, one of the key's own table, a 20-byte key's bytes
	var worst uint64
	prev := s.Stats().Evictions
	for i := range 60_000 {
		if _, err := s.AllowN(ctx, "busy"+strconv.Itoa(i), busy, 1); err != nil {
			t.Fatal(err)
		}
		e := s.Stats().Evictions
		worst = max(worst, e-prev)
		prev = e
	}
	if worst > bound {
		t.Errorf("one new key evicted %d keys, want at most %d", worst, bound)
	}
	if st := s.Stats(); st.Bytes > st.MaxBytes {
		t.Errorf("Stats().Bytes = %d > MaxBytes %d", st.Bytes, st.MaxBytes)
	}
}

// heapAfterGC returns the live heap once the garbage is collected.
func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestSlidingLogAmplificationBounded plays the amplification attack on the
// store: 100 requests of cost 1,048,576 on a sliding log of 1,048,576 per
// year, each on a key of its own, about 15 KB of requests. Each is one entry
// of its key's log, so the heap grows by a few kilobytes, not by the 8 MB per
// request that one entry per unit would hold for a year.
func TestSlidingLogAmplificationBounded(t *testing.T) {
	s := memstore.New(memstore.Config{SweepInterval: -1})
	defer s.Close()
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: sluice.MaxLogRate, Period: 365 * 24 * time.Hour}
	ctx := context.Background()
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "amplify:" + strconv.Itoa(i)
	}
	before := heapAfterGC()
	for i, key := range keys {
		r, err := s.AllowN(ctx, key, lim, lim.Rate)
		if err != nil || !r.Allowed {
			t.Fatalf("AllowN(%q, cost %d) = %+v, %v; want admitted", key, lim.Rate, r, err)
		}
		if grown := int64(heapAfterGC()) - int64(before); i%10 == 0 && grown > 4<<20 {
			t.Fatalf("after %d requests the heap grew by %d bytes, want under 4 MiB", i+1, grown)
		}
	}
	grown := int64(heapAfterGC()) - int64(before)
	if grown > 4<<20 {
		t.Fatalf("100 requests of cost %d grew the heap by %d bytes, want under 4 MiB", lim.Rate, grown)
	}
	t.Logf("100 requests of cost %d grew the heap by %d bytes", lim.Rate, grown)
	runtime.KeepAlive(s)
}

// The flood the issue reproduced, on a store of 1 MiB (serve's
// -memory-max-bytes 1m): a client spends its own key (a fixed window of 3
// an hour, a token bucket of 10 an hour), then sends 40,000 distinct keys,
// each spent, two and a half times what the store and its sketch hold. Its
// key is evicted and must come back as spent: refused until its reset, and
// peeked at as refused while it is out of the store. Before the sketch it
// came back full after 20,000 keys.
func TestFloodOfSpentKeysUnderOneMebibyteKeepsRefusing(t *testing.T) {
	for _, lim := range []sluice.Limit{
		{Algorithm: sluice.FixedWindow, Rate: 3, Period: time.Hour},
		{Algorithm: sluice.TokenBucket, Rate: 10, Period: time.Hour, Burst: 10},
	} {
		t.Run(lim.Algorithm.String(), func(t *testing.T) {
			clock := clocktest.New()
			s := newTestStore(t, memstore.Config{Clock: clock, MaxBytes: 1 << 20})
			ctx := context.Background()
			mustAllow(t, s, "mine", lim, lim.Capacity())
			first := mustAllow(t, s, "mine", lim, 1)
			if first.Allowed {
				t.Fatalf("my key after spending its capacity = %+v, want refused", first)
			}
			reset := clock.Now().Add(first.RetryAfter)
			const flood = 40_000
			for i := range flood {
				if i%100 == 0 {
					clock.Advance(time.Millisecond)
				}
				key := "flood:" + strconv.Itoa(i)
				mustAllow(t, s, key, lim, lim.Capacity())
				if i%5000 == 4999 {
					if p, err := s.Peek(ctx, "mine", lim); err != nil || p.Remaining != 0 {
						t.Fatalf("after %d keys Peek(mine) = %+v, %v; want remaining 0", i+1, p, err)
					}
					if r := mustAllow(t, s, "mine", lim, 1); r.Allowed {
						st := s.Stats()
						t.Fatalf("after %d spent keys (store: %d keys, %d evictions), my key was admitted again: %+v", i+1, st.Keys, st.Evictions, r)
					}
				}
			}
			st := s.Stats()
			t.Logf("after %d keys: %d held, %d bytes of %d (sketch %d), %d evicted, %d remembered, %d merged", flood, st.Keys, st.Bytes, st.MaxBytes, st.SketchBytes, st.Evictions, st.Remembered, st.Merged)
			if st.Evictions < flood/2 || st.Remembered == 0 {
				t.Fatalf("%d evictions, %d remembered: the flood did not push the key out", st.Evictions, st.Remembered)
			}
			if st.Bytes > st.MaxBytes {
				t.Errorf("Stats().Bytes %d > MaxBytes %d", st.Bytes, st.MaxBytes)
			}
			clock.Set(reset.Add(-time.Millisecond))
			if r := mustAllow(t, s, "mine", lim, 1); r.Allowed {
				t.Fatalf("a millisecond before my key's reset, it was admitted: %+v", r)
			}
		})
	}
}

// A sliding log's bytes follow its entries both ways: a full exact log of
// 1,000 an hour is charged its 1,000 entries of 16 bytes, and once they
// have left the window the next request shrinks the ring and the charge,
// so Stats().Bytes comes back to about where it was.
func TestSlidingLogBytesFollowItsEntries(t *testing.T) {
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock, Shards: 1, SweepInterval: -1})
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 1000, Period: time.Hour}
	mustAllow(t, s, "log", lim, 1)
	small := s.Stats().Bytes
	for range lim.Rate - 1 {
		clock.Advance(time.Millisecond)
		mustAllow(t, s, "log", lim, 1)
	}
	full := s.Stats().Bytes
	if grown := full - small; grown < 16*(1000-4) || grown > 16*1000 {
		t.Fatalf("1,000 entries grew Bytes by %d, want about %d", grown, 16*1000)
	}
	clock.Advance(lim.Period)
	mustAllow(t, s, "log", lim, 1)
	if after := s.Stats().Bytes; after-small > 16*64 {
		t.Fatalf("after every entry left, Bytes %d, want within %d of %d", after, 16*64, small)
	}
}

// Long sliding logs on keys of their own shards stay within MaxBytes:
// 16 keys, each asked for 20,000 entries of 16 bytes (320 KB, 5 MB in
// all) against a budget of 1 MiB over 16 shards. A log that is its
// shard's only key cannot evict another to make room; it coarsens its
// slot instead of growing past the shard's share, which only ever makes it
// refuse sooner: no window holds more than the rate. Before,
// each shard's one log was kept past its share, and the store held about
// five times its budget.
func TestLongSlidingLogsOnTheirOwnShardsStayWithinMaxBytes(t *testing.T) {
	const maxBytes, keys, entries = 1 << 20, 16, 20_000
	clock := clocktest.New()
	before := heapAfterGC()
	s := newTestStore(t, memstore.Config{Clock: clock, MaxBytes: maxBytes, Shards: keys})
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 1 << 17, Period: time.Hour}
	for range entries {
		clock.Advance(time.Microsecond) // units at distinct instants are distinct entries
		for k := range keys {
			if r := mustAllow(t, s, "log"+strconv.Itoa(k), lim, 1); !r.Allowed {
				t.Fatalf("log %d denied within its rate: %+v", k, r)
			}
		}
	}
	st := s.Stats()
	grown := int64(heapAfterGC()) - int64(before)
	t.Logf("%d logs of %d entries asked: %d keys held in %d bytes (heap grew %d), budget %d", keys, entries, st.Keys, st.Bytes, grown, st.MaxBytes)
	if st.Bytes > maxBytes {
		t.Errorf("Stats().Bytes = %d > MaxBytes %d", st.Bytes, maxBytes)
	}
	if grown > 2*maxBytes {
		t.Errorf("the heap grew by %d bytes, want under 2·MaxBytes = %d", grown, 2*maxBytes)
	}
	runtime.KeepAlive(s)
}

// A log held to a small share still counts every unit: it admits its rate
// within its period and refuses the next unit, and its merged entries
// leave no earlier than the units they hold.
func TestSlidingLogHeldToItsShareStillRefusesPastItsRate(t *testing.T) {
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock, MaxBytes: 8 << 10, Shards: 1})
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 5000, Period: time.Hour}
	start := clock.Now()
	for i := range lim.Rate {
		clock.Advance(time.Millisecond)
		if r := mustAllow(t, s, "log", lim, 1); !r.Allowed {
			t.Fatalf("unit %d of %d denied", i+1, lim.Rate)
		}
	}
	if st := s.Stats(); st.Bytes > st.MaxBytes {
		t.Errorf("Stats().Bytes = %d > MaxBytes %d", st.Bytes, st.MaxBytes)
	}
	if r := mustAllow(t, s, "log", lim, 1); r.Allowed {
		t.Fatalf("unit %d within the period admitted: %+v", lim.Rate+1, r)
	}
	// An hour after the first unit, the exact log would admit one more; the
	// merged one may wait longer, but never admits more than the units that
	// left: still refused just before the first unit leaves.
	clock.Set(start.Add(lim.Period))
	if r := mustAllow(t, s, "log", lim, 1); r.Allowed {
		t.Fatalf("at the period's end, before the first unit leaves, admitted: %+v", r)
	}
}

// A log held to its shard's share keeps its rate: 1,000 a minute, 10,000
// requests one every 60 ms (exactly the rate), under a MaxBytes of 1 MiB
// (16 KiB a shard: a ring of about 715 entries where the limit needs 1,000).
// It admits at least the rate less one of its slots' worth a period, never
// more than the rate in any window. When the capped log merged its two
// oldest entries it admitted 8,000, while the store held 320 KiB; held
// only on the decisions that found its ring full, it logged exact entries
// between them that crowded the coarse ones, and admitted 9,211.
func TestSlidingLogHeldToItsShareKeepsItsRate(t *testing.T) {
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock, MaxBytes: 1 << 20})
	lim := sluice.Limit{Algorithm: sluice.SlidingLog, Rate: 1000, Period: time.Minute}
	const n = 10_000
	step := lim.Period / time.Duration(lim.Rate)
	var admitted []time.Time
	var most int64
	for range n {
		clock.Advance(step)
		if mustAllow(t, s, "log", lim, 1).Allowed {
			admitted = append(admitted, clock.Now())
		}
		most = max(most, s.Stats().Bytes)
	}
	// The log holds at least 64 entries, so its slot is at most that of
	// 64 entries; at exactly the rate it holds ⌈slot/step⌉ requests.
	slot := time.Duration(algorithm.LogSlot(lim, algorithm.LogEntries))
	perSlot := int((slot + step - 1) / step)
	periods := int((n*step + lim.Period - 1) / lim.Period)
	if want := n - periods*perSlot; len(admitted) < want {
		t.Errorf("admitted %d of %d requests at exactly the rate, want at least %d", len(admitted), n, want)
	}
	for i := lim.Rate; i < len(admitted); i++ {
		if admitted[i].Sub(admitted[i-lim.Rate]) < lim.Period {
			t.Fatalf("admitted %d units within %v", lim.Rate+1, admitted[i].Sub(admitted[i-lim.Rate]))
		}
	}
	if st := s.Stats(); most > st.MaxBytes {
		t.Errorf("Stats().Bytes reached %d > MaxBytes %d", most, st.MaxBytes)
	}
	t.Logf("admitted %d of %d; the store held at most %d bytes", len(admitted), n, most)
}

// A refund under another k or d lays a moments key's buffer out anew, up
// to about 200 bytes larger: the store evicts to stay within MaxBytes, as
// it does when a decision grows a key.
func TestMomentsRefundThatGrowsAKeyStaysWithinMaxBytes(t *testing.T) {
	const maxBytes = 64 << 10
	clock := clocktest.New()
	s := newTestStore(t, memstore.Config{Clock: clock, MaxBytes: maxBytes, Shards: 1})
	small := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Minute, Moments: 1}
	n := 0
	for ; s.Stats().Evictions == 0; n++ {
		mustAllow(t, s, "m"+strconv.Itoa(n), small, 1)
	}
	big := small
	big.Buckets, big.Moments = sluice.MaxBuckets, sluice.MaxMoments
	for i := n - 1; i >= n-20; i-- {
		if err := s.RefundN(context.Background(), "m"+strconv.Itoa(i), big, 1); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.Bytes > maxBytes {
			t.Fatalf("after %d refunds that grew a key: Bytes %d > MaxBytes %d", n-i, st.Bytes, maxBytes)
		}
	}
}

// A key of up to 19 bytes costs the store its slot and nothing more, so
// that 1,000 keys of 8 bytes and 1,000 of 19 count the same bytes; a key of
// 20 bytes costs its slot, its 24 bytes (rounded up to 8) and a 16-byte
// entry in its table's array of long keys, which grows by doubling.
func TestKeyBytesCountedOnlyBeyondTheSlot(t *testing.T) {
	const n = 1000
	bytesOf := func(format string) int64 {
		s := newTestStore(t, memstore.Config{Clock: clocktest.New(), Shards: 1})
		lim := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 10, Period: time.Second, Burst: 10}
		for i := range n {
			mustAllow(t, s, fmt.Sprintf(format, i), lim, 1)
		}
		return s.Stats().Bytes
	}
	short, inline, long := bytesOf("%08d"), bytesOf("user:%014d"), bytesOf("user:%015d")
	if inline != short {
		t.Errorf("1,000 keys of 19 bytes count %d bytes, of 8 bytes %d: want the same (the slots alone)", inline, short)
	}
	if d := long - inline; d < n*(24+16) || d > n*(24+16)+n*16 {
		t.Errorf("1,000 keys of 20 bytes count %d bytes more than of 19, want %d plus the array's spare entries (at most %d)", d, n*(24+16), n*16)
	}
}
