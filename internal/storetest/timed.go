package storetest

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TimedDecisions runs b.N decisions from conc goroutines, decide(i) being
// the i-th, and reports decisions/s from the first to the last. Every
// decision must admit: an error or a denial fails b and ends that
// goroutine. It resets b's timer before the first and stops it after the
// last, and returns the decisions' latencies, sorted, for percentiles.
func TimedDecisions(b *testing.B, conc int, decide func(i int64) (sluice.Result, error)) []time.Duration {
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	begin := time.Now()
	for range conc {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				r, err := decide(i)
				lat[i] = time.Since(t0)
				if err != nil || !r.Allowed {
					b.Errorf("decision %d = %+v, %v", i, r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "decisions/s")
	return lat
}
