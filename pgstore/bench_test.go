package pgstore_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
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
	s := openConns(b, url, conc)
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
	warm(b, conc, func(i int) error {
		_, err := s.Allow(ctx, keys[i], lim)
		return err
	})
	lat := storetest.TimedDecisions(b, conc, func(i int64) (sluice.Result, error) {
		return s.Allow(ctx, keys[i%int64(len(keys))], lim)
	})
	reportLatency(b, lat)
}

// BenchmarkRefusals measures refused decisions, the path a client past its
// quota drives: one hot key whose quota of 1 is spent before the timer
// starts, exactly conc goroutines sharing b.N decisions of cost 1 on a pool
// of conc connections, fsync=off. Its decisions/s are refusals/s: a
// decision that admits fails the run.
func BenchmarkRefusals(b *testing.B) {
	srv := pgtest.StartServer(b, "fsync=off")
	for _, conc := range []int{1, 16, 64} {
		b.Run("fsync=off/conc="+strconv.Itoa(conc)+"/keys=hot", func(b *testing.B) { benchRefusals(b, srv.URL(), conc) })
	}
}

func benchRefusals(b *testing.B, url string, conc int) {
	s := openConns(b, url, conc)
	ctx := context.Background()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1, Period: sluice.MaxPeriod}
	key := "refused:" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if r, err := s.Allow(ctx, key, lim); err != nil || !r.Allowed {
		b.Fatalf("spending the quota: %+v, %v", r, err)
	}
	warm(b, conc, func(int) error {
		_, err := s.Allow(ctx, key, lim)
		return err
	})
	errAdmitted := errors.New("admitted past a spent quota")
	lat := storetest.TimedDecisions(b, conc, func(int64) (sluice.Result, error) {
		r, err := s.Allow(ctx, key, lim)
		if err == nil && r.Allowed {
			return r, errAdmitted
		}
		// TimedDecisions fails a run on a denial; here a denial is the
		// expected outcome, so it is reported to it as a success.
		return sluice.Result{Allowed: err == nil}, err
	})
	reportLatency(b, lat)
}

// openConns opens a store on url with a pool of exactly conc connections.
func openConns(b *testing.B, url string, conc int) *pgstore.Store {
	s, _ := openURL(b, url+"&pool_max_conns="+strconv.Itoa(conc)+"&pool_min_conns="+strconv.Itoa(conc), nil)
	return s
}

// warm makes conc concurrent calls of decide, twice, so that the pool's
// connections are open and have prepared their statements before the timer
// starts.
func warm(b *testing.B, conc int, decide func(i int) error) {
	for range 2 {
		var wg sync.WaitGroup
		for i := range conc {
			wg.Go(func() {
				if err := decide(i); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
}

// reportLatency reports the p50 and p99 of lat, sorted.
func reportLatency(b *testing.B, lat []time.Duration) {
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkDecisionsWithDeadline is BenchmarkDecisions' fsync=off, conc=1
// over 10,000 keys, each decision given a deadline of 1 s, as every
// decision behind package failsafe has: the path that bounds the
// statement on the server's side (statement_timeout) as well.
func BenchmarkDecisionsWithDeadline(b *testing.B) {
	srv := pgtest.StartServer(b, "fsync=off")
	s := openConns(b, srv.URL(), 1)
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: sluice.MaxRate, Period: time.Hour}
	prefix := "bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	keys := make([]string, 10000)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	decide := func(i int64) (sluice.Result, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return s.Allow(ctx, keys[i%int64(len(keys))], lim)
	}
	warm(b, 1, func(i int) error {
		_, err := decide(int64(i))
		return err
	})
	lat := storetest.TimedDecisions(b, 1, decide)
	reportLatency(b, lat)
}
