package memstore_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/memstore"
)

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
