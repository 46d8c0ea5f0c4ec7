//go:build unix

package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
	"github.com/sluicehq/sluice/relief"
)

// BenchmarkReservationsOnPostgres measures admitted fixed-window
// decisions of cost 1 on PostgreSQL through serve's reservations
// (-reserve-units 20 -reserve-hold 100ms) and without them, at 1, 16 and 64
// goroutines sharing b.N decisions, on a pool of as many connections, over
// 10,000 keys or one hot key; it reports decisions/s and p99. fsync=off, as
// the test servers run; client and server share the machine. Compare with
// pgstore's BenchmarkDecisions.
func BenchmarkReservationsOnPostgres(b *testing.B) {
	srv := pgtest.StartServer(b)
	for _, reserve := range []int{0, 20} {
		for _, conc := range []int{1, 16, 64} {
			for _, hot := range []bool{false, true} {
				name := "reserve=" + strconv.Itoa(reserve) + "/conc=" + strconv.Itoa(conc) + "/keys=10000"
				if hot {
					name = "reserve=" + strconv.Itoa(reserve) + "/conc=" + strconv.Itoa(conc) + "/keys=hot"
				}
				b.Run(name, func(b *testing.B) { benchReservations(b, srv.URL(), reserve, conc, hot) })
			}
		}
	}
}

func benchReservations(b *testing.B, url string, reserve, conc int, hot bool) {
	ctx := context.Background()
	st, err := pgstore.Open(ctx, url+"&pool_max_conns="+strconv.Itoa(conc)+"&pool_min_conns="+strconv.Itoa(conc), pgstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var lim sluice.Limiter = st
	if reserve > 0 {
		lim = relief.NewBatcher(st, relief.BatchConfig{Batch: reserve, Hold: 100 * time.Millisecond})
	}
	quota := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: sluice.MaxRate, Period: time.Hour}
	prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	key := func(i int64) string {
		if hot {
			return prefix + "hot"
		}
		return prefix + strconv.FormatInt(i%10000, 10)
	}
	lat := storetest.TimedDecisions(b, conc, func(i int64) (sluice.Result, error) {
		return lim.AllowN(ctx, key(i), quota, 1)
	})
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
