package pgstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
)

// BenchmarkDecisions measures admitted fixed-window decisions of cost 1:
// exactly conc goroutines share b.N decisions, on a pool of conc
// connections, over 10,000 keys or one hot key (whose row every decision
// locks in turn); each decision is timed into a preallocated slice, and the
// run reports decisions/s, p50 and p99. fsync=off is the test servers'
// setting (a commit waits for the write-ahead log to reach the operating
// system, not the disk); fsync=on waits for the disk, as production does.
// Client and server share the machine.
func BenchmarkDecisions(b *testing.B) {
	for _, fsync := range []string{"off", "on"} {
		srv := pgtest.StartServer(b, "fsync="+fsync)
		for _, conc := range []int{1, 16, 64} {
			for _, hot := range []bool{false, true} {
				if hot && conc == 1 {
					continue
				}
				name := "fsync=" + fsync + "/conc=" + strconv.Itoa(conc) + "/keys=10000"
				if hot {
					name = "fsync=" + fsync + "/conc=" + strconv.Itoa(conc) + "/keys=hot"
				}
				b.Run(name, func(b *testing.B) { benchDecisions(b, srv.URL(), conc, hot) })
			}
		}
	}
}

func benchDecisions(b *testing.B, url string, conc int, hot bool) {
	s, _ := openURL(b, url+"&pool_max_conns="+strconv.Itoa(conc)+"&pool_min_conns="+strconv.Itoa(conc), nil)
	ctx := context.Background()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: sluice.MaxRate, Period: time.Hour}
	prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		if hot {
			keys[i] = prefix + "hot"
		}
	}
	// Warm the pool's connections and their prepared statements.
	var wg sync.WaitGroup
	for i := range conc {
		wg.Go(func() {
			if _, err := s.Allow(ctx, keys[i], lim); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	lat := storetest.TimedDecisions(b, conc, func(i int64) (sluice.Result, error) {
		return s.Allow(ctx, keys[i%int64(len(keys))], lim)
	})
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
