package memstore_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

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
