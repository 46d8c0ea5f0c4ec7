package memstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

// benchLimit is generous, so that most decisions admit and the benchmark
// measures the usual path.
func benchLimit(a sluice.Algorithm) sluice.Limit {
	rate := 1_000_000_000
	if a == sluice.SlidingLog {
		rate = sluice.MaxLogRate
	}
	return sluice.Limit{Algorithm: a, Rate: rate, Period: time.Second, Burst: rate}
}

// forEachHotKey runs bench once per algorithm, as "hotkey/<algorithm>", on
// a fresh store without a sweeper and the algorithm's benchLimit.
func forEachHotKey(b *testing.B, bench func(b *testing.B, s *memstore.Store, lim sluice.Limit)) {
	forEachHotKeyWith(b, memstore.Config{SweepInterval: -1}, bench)
}

// forEachHotKeyWith is forEachHotKey on stores configured by cfg.
func forEachHotKeyWith(b *testing.B, cfg memstore.Config, bench func(b *testing.B, s *memstore.Store, lim sluice.Limit)) {
	for _, a := range sluice.Algorithms() {
		lim := benchLimit(a)
		b.Run("hotkey/"+a.String(), func(b *testing.B) {
			s := memstore.New(cfg)
			defer s.Close()
			bench(b, s, lim)
		})
	}
}

func BenchmarkAllowN(b *testing.B) {
	benchAllowN(b, memstore.Config{SweepInterval: -1})
	// The same decisions on the coarse clock, refreshed every 100µs.
	b.Run("coarse", func(b *testing.B) {
		benchAllowN(b, memstore.Config{SweepInterval: -1, ClockResolution: 100 * time.Microsecond})
	})
}

// benchAllowN runs AllowN on a hot key from one goroutine and over 100,000
// held keys from GOMAXPROCS goroutines, for every algorithm, on stores
// configured by cfg.
func benchAllowN(b *testing.B, cfg memstore.Config) {
	ctx := context.Background()
	forEachHotKeyWith(b, cfg, func(b *testing.B, s *memstore.Store, lim sluice.Limit) {
		allowed := 0
		for b.Loop() {
			r, err := s.AllowN(ctx, "user:42", lim, 1)
			if err != nil {
				b.Fatal(err)
			}
			if r.Allowed {
				allowed++
			}
		}
		if allowed == 0 {
			b.Fatal("nothing admitted")
		}
	})
	for _, a := range sluice.Algorithms() {
		lim := benchLimit(a)
		const nkeys = 100_000
		b.Run("keys=100000/parallel/"+a.String(), func(b *testing.B) {
			s := memstore.New(cfg)
			defer s.Close()
			keys := make([]string, nkeys)
			for i := range keys {
				keys[i] = "user:" + strconv.Itoa(i)
				if _, err := s.AllowN(ctx, keys[i], lim, 1); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(time.Now().UnixNano()) % nkeys
				for pb.Next() {
					if _, err := s.AllowN(ctx, keys[i], lim, 1); err != nil {
						b.Error(err)
						return
					}
					if i++; i == nkeys {
						i = 0
					}
				}
			})
		})
	}
}

// BenchmarkMemoryPerKey reports the heap bytes one held key costs beyond the
// bytes of the key itself, for 1,000,000 keys of each algorithm.
func BenchmarkMemoryPerKey(b *testing.B) {
	const n = 1_000_000
	ctx := context.Background()
	lims := []sluice.Limit{}
	for _, a := range sluice.Algorithms() {
		lims = append(lims, sluice.Limit{Algorithm: a, Rate: 10, Period: time.Hour, Burst: 10})
	}
	// The bucketed sliding window: one state size for every k.
	lims = append(lims, sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Hour, Buckets: 16})
	// With moments: a 32-byte state and a buffer sized by k and d.
	for _, c := range []struct{ k, d uint8 }{{8, 4}, {5, 8}, {8, 6}, {16, 2}} {
		lims = append(lims, sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10, Period: time.Hour, Buckets: c.k, Moments: c.d})
	}
	for _, lim := range lims {
		name := lim.Algorithm.String()
		if lim.Buckets > 1 {
			name += "_buckets_" + strconv.Itoa(int(lim.Buckets))
		}
		if lim.Moments > 0 {
			name += "_moments_" + strconv.Itoa(int(lim.Moments))
		}
		b.Run(name, func(b *testing.B) {
			keys := make([]string, n)
			keyBytes := 0
			for i := range keys {
				keys[i] = "user:" + strconv.Itoa(i)
				keyBytes += len(keys[i])
			}
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				s := memstore.New(memstore.Config{SweepInterval: -1, MaxKeys: 2 * n, MaxBytes: 1 << 40})
				for _, k := range keys {
					s.AllowN(ctx, k, lim, 1)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if s.Len() != n {
					b.Fatalf("Len = %d, want %d", s.Len(), n)
				}
				b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)-int64(keyBytes))/n, "B/key")
				runtime.KeepAlive(s)
				s.Close()
			}
		})
	}
}

// BenchmarkFootprint reports the heap one held key costs, key bytes
// included, for keys of 16 bytes and of 4 KB under each algorithm. The
// number of keys is SLUICE_FOOTPRINT_KEYS (default 100,000); 1,000,000 keys
// of 4 KB need about 5 GB of heap per algorithm.
func BenchmarkFootprint(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("SLUICE_FOOTPRINT_KEYS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	for _, size := range []int{16, 4096} {
		for _, a := range sluice.Algorithms() {
			b.Run(fmt.Sprintf("key=%dB/keys=%d/%v", size, n, a), func(b *testing.B) {
				lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Hour, Burst: 10}
				buf := make([]byte, size)
				for i := range buf {
					buf[i] = 'x'
				}
				for b.Loop() {
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					s := memstore.New(footprintConfig(n))
					for i := range n {
						// The key is built afresh each time: the store
						// clones what it keeps, so the test holds nothing.
						strconv.AppendInt(buf[:size-11], int64(i)+1e10, 10)
						if _, err := s.AllowN(ctx, string(buf), lim, 1); err != nil {
							b.Fatal(err)
						}
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					if s.Len() != n {
						b.Fatalf("Len = %d, want %d", s.Len(), n)
					}
					b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(n), "B/key")
					runtime.KeepAlive(s)
					s.Close()
				}
			})
		}
	}
}

func footprintConfig(n int) memstore.Config {
	return memstore.Config{SweepInterval: -1, MaxKeys: 2 * n, MaxBytes: 1 << 40}
}

// BenchmarkNewKeyAtBound measures the path of a key the store does not
// hold, in a store at its MaxKeys (65,536): every decision spends the
// whole allowance of a key new to the table (cycling through 262,144 keys,
// four times the bound), so it evicts a spent key and creates one: the
// eviction sample and, with the sketch of evicted keys, a remember and a
// recall. The clock stands still, so no key is ever idle.
func BenchmarkNewKeyAtBound(b *testing.B) {
	keys := make([]string, 1<<18)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(1e9+i)
	}
	for _, a := range sluice.Algorithms() {
		b.Run(a.String(), func(b *testing.B) {
			lim := sluice.Limit{Algorithm: a, Rate: 10, Period: time.Hour, Burst: 10}
			s := memstore.New(memstore.Config{MaxKeys: 1 << 16, SweepInterval: -1, Clock: fixedClock{}})
			defer s.Close()
			ctx := context.Background()
			for _, k := range keys[:1<<16] {
				if _, err := s.AllowN(ctx, k, lim, 10); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				if _, err := s.AllowN(ctx, keys[(1<<16+i)&(1<<18-1)], lim, 10); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fixedClock always tells the same instant.
type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Unix(1700000000, 0) }

// BenchmarkAllowNWideCounter is BenchmarkAllowN's hot key on the CPU's
// counter with no bound on an anchor's pair of reads (memstore.NewWideTSC):
// for counting a decision's instructions under callgrind, where the bound
// would keep every reading on the monotonic clock. Natively it decides as
// BenchmarkAllowN does on a machine whose kernel keeps time with the counter.
func BenchmarkAllowNWideCounter(b *testing.B) {
	if !memstore.TSCKernel() {
		b.Skip("the kernel does not keep time with the CPU's counter here")
	}
	ctx := context.Background()
	for _, a := range []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow} {
		lim := benchLimit(a)
		b.Run("hotkey/"+a.String(), func(b *testing.B) {
			s := memstore.NewWideTSC(memstore.Config{SweepInterval: -1})
			defer s.Close()
			for b.Loop() {
				if _, err := s.AllowN(ctx, "user:42", lim, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAllowNDefaultSlidingWindow compares a decision of a
// sliding_window rule under the config's default before it moved (the
// two-window counter) and after (buckets 16, moments 2), at 10,000 per
// second, the most a rule with moments may have: on 100,000 keys in turn
// from one goroutine (each key far below its limit: admitted), and on one
// hot key (nearly every decision refused, each searching its retry time).
func BenchmarkAllowNDefaultSlidingWindow(b *testing.B) {
	ctx := context.Background()
	counter := sluice.Limit{Algorithm: sluice.SlidingWindow, Rate: 10_000, Period: time.Second}
	moments := counter
	moments.Buckets, moments.Moments = 16, 2 // config.DefaultSlidingWindow(counter)
	for _, c := range []struct {
		name string
		lim  sluice.Limit
	}{{"counter", counter}, {"buckets_16_moments_2", moments}} {
		b.Run("keys=100000/"+c.name, func(b *testing.B) {
			s := memstore.New(memstore.Config{SweepInterval: -1})
			defer s.Close()
			keys := make([]string, 100_000)
			for i := range keys {
				keys[i] = "user:" + strconv.Itoa(i)
			}
			i := 0
			for b.Loop() {
				if _, err := s.AllowN(ctx, keys[i], c.lim, 1); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
		b.Run("hotkey/"+c.name, func(b *testing.B) {
			s := memstore.New(memstore.Config{SweepInterval: -1})
			defer s.Close()
			for b.Loop() {
				if _, err := s.AllowN(ctx, "user:42", c.lim, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAllowNHeldKeys decides on 100,000 held keys from one goroutine,
// on a store whose Clock stands still: the path that misses the cache on
// the key's slot, counted under callgrind (where the CPU's counter does not
// calibrate) without the clock's cost. Keys are "user:0" to "user:99999",
// 6 to 10 bytes, visited in the order they were made ("inorder": the keys'
// bytes, the caller's and any the store cloned, are read in address order)
// or in a fixed shuffled order ("shuffled": each key's bytes are a line of
// their own, as for keys that arrive at random).
func BenchmarkAllowNHeldKeys(b *testing.B) {
	ctx := context.Background()
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	shuffled := make([]string, len(keys))
	for i, j := range rand.New(rand.NewPCG(1, 2)).Perm(len(keys)) {
		shuffled[i] = keys[j]
	}
	for _, a := range []sluice.Algorithm{sluice.TokenBucket, sluice.FixedWindow} {
		lim := benchLimit(a)
		for _, order := range []struct {
			name string
			keys []string
		}{{"inorder", keys}, {"shuffled", shuffled}} {
			b.Run(a.String()+"/"+order.name, func(b *testing.B) {
				s := memstore.New(memstore.Config{SweepInterval: -1, Clock: fixedClock{}})
				defer s.Close()
				for _, k := range keys {
					if _, err := s.AllowN(ctx, k, lim, 1); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if _, err := s.AllowN(ctx, order.keys[i], lim, 1); err != nil {
						b.Fatal(err)
					}
					if i++; i == len(order.keys) {
						i = 0
					}
				}
			})
		}
	}
}
