package pgstore_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/storetest"
	"github.com/sluicehq/sluice/pgstore"
)

// BenchmarkFirstDecisions measures a key's first decision in a period,
// the one that takes the key's place in its group under
// Config.MaxKeysPerGroup: every timed decision is of a new key, all of one
// group (a group of their own per run), exactly conc goroutines on a pool
// of conc connections, fsync=off. cap=off is MaxKeysPerGroup -1, cap=on
// the default (100,000). It reports decisions/s, p50 and p99, and the CPU
// time per decision of the client process and of the pool's server
// backends (Linux: from getrusage and /proc/<pid>/stat, in clock ticks, so
// run enough decisions for ticks of 10 ms to be small beside the total),
// which the machine's load disturbs far less than wall time.
func BenchmarkFirstDecisions(b *testing.B) {
	srv := pgtest.StartServer(b, "fsync=off")
	for _, maxKeys := range []int64{-1, 0} {
		for _, conc := range []int{1, 16} {
			name := "cap=on/conc=" + strconv.Itoa(conc)
			if maxKeys < 0 {
				name = "cap=off/conc=" + strconv.Itoa(conc)
			}
			b.Run(name, func(b *testing.B) { benchFirstDecisions(b, srv.URL(), conc, maxKeys) })
		}
	}
}

func benchFirstDecisions(b *testing.B, url string, conc int, maxKeys int64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, url+"&pool_max_conns="+strconv.Itoa(conc)+"&pool_min_conns="+strconv.Itoa(conc),
		pgstore.Config{MaxKeysPerGroup: maxKeys})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: sluice.MaxRate, Period: time.Hour}
	// One group per run ("first_<run>"), so that runs do not fill each
	// other's cap.
	group := "first_" + strconv.FormatInt(time.Now().UnixNano(), 36) + "_"
	warm(b, conc, func(i int) error {
		_, err := s.Allow(context.Background(), group+"warm"+strconv.Itoa(i), lim)
		return err
	})
	pids := backends(b, s, conc)
	client0, server0 := clientCPU(), serverCPU(pids)
	lat := storetest.TimedDecisions(b, conc, func(i int64) (sluice.Result, error) {
		return s.Allow(context.Background(), group+strconv.FormatInt(i, 10), lim)
	})
	client, server := clientCPU()-client0, serverCPU(pids)-server0
	reportLatency(b, lat)
	if server >= 0 {
		b.ReportMetric(float64(client.Microseconds())/float64(b.N), "client-cpu-µs/op")
		b.ReportMetric(float64(server.Microseconds())/float64(b.N), "server-cpu-µs/op")
	}
}

// backends returns the process ids of the server backends of s's pool's
// conc connections, all held at once so that each is a different one.
func backends(b *testing.B, s *pgstore.Store, conc int) []int {
	var pids []int
	var conns []*pgxpool.Conn
	for range conc {
		c, err := s.Pool().Acquire(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		var pid int
		if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			b.Fatal(err)
		}
		pids = append(pids, pid)
	}
	for _, c := range conns {
		c.Release()
	}
	return pids
}

// clientCPU is the CPU time the process has used, user and system.
func clientCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time the processes pids have used, user and system,
// from /proc (clock ticks taken as 10 ms); -1 where /proc cannot tell.
func serverCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return -1
		}
		// The fields after the command's closing parenthesis: state is the
		// first (field 3), utime and stime fields 14 and 15.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			return -1
		}
		ut, err1 := strconv.ParseInt(f[11], 10, 64)
		st, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return -1
		}
		total += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return total
}
