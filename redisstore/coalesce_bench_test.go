package redisstore_test

import (
	"context"
	"regexp"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// BenchmarkCoalesce is a fixed-window decision from one goroutine and from
// 64 over 1,000 keys, each row on a redis-server of its own, without
// coalescing (wait=0) and with it: this process's CPU per decision
// (cli-cpu-µs/op), redis-server's (srv-cpu-µs/op), the time Redis spent
// in the script calls per decision (script-µs/op, INFO commandstats) and
// the decisions per script call.
func BenchmarkCoalesce(b *testing.B) {
	for _, c := range []struct {
		conc int
		wait time.Duration
	}{{1, 0}, {1, 20 * time.Microsecond}, {64, 0}, {64, 20 * time.Microsecond}, {64, 200 * time.Microsecond}} {
		wait := c.wait
		b.Run("conc="+strconv.Itoa(c.conc)+"/wait="+wait.String(), func(b *testing.B) {
			srv := redistest.StartServer(b)
			s := openConfig(b, redisstore.Config{URL: "redis://" + srv.Addr, CoalesceWait: wait}, nil)
			lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 1_000_000_000, Period: time.Hour}
			ctx := context.Background()
			keys := benchKeys("coalesce:")
			for _, k := range keys { // scripts loaded, connections made
				if _, err := s.Allow(ctx, k, lim); err != nil {
					b.Fatal(err)
				}
			}
			srv.Do(b, "CONFIG", "RESETSTAT")
			srv0, cli0 := serverCPU(b, srv), processCPU(b)
			b.ResetTimer()
			if c.conc == 1 {
				for i := range b.N {
					if _, err := s.Allow(ctx, keys[i%len(keys)], lim); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism(c.conc / runtime.GOMAXPROCS(0))
				parallelOverKeys(b, keys, func(key string) error {
					_, err := s.Allow(ctx, key, lim)
					return err
				})
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(processCPU(b)-cli0)/1e3/n, "cli-cpu-µs/op")
			b.ReportMetric(float64(serverCPU(b, srv)-srv0)/1e3/n, "srv-cpu-µs/op")
			calls, usec := scriptStats(b, srv)
			b.ReportMetric(usec/n, "script-µs/op")
			b.ReportMetric(n/calls, "decisions/call")
			if testing.Verbose() {
				b.Log(srv.Do(b, "INFO", "commandstats"))
			}
		})
	}
}

// serverCPU is redis-server's CPU time, user and system.
func serverCPU(b *testing.B, srv *redistest.Server) time.Duration {
	info := srv.Do(b, "INFO", "cpu")
	var total float64
	for _, m := range regexp.MustCompile(`used_cpu_(?:user|sys):([0-9.]+)`).FindAllStringSubmatch(info, 2) {
		f, _ := strconv.ParseFloat(m[1], 64)
		total += f
	}
	return time.Duration(total * float64(time.Second))
}

// processCPU is this process's CPU time, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// scriptStats returns EVALSHA's calls and the microseconds Redis spent in
// them since CONFIG RESETSTAT.
func scriptStats(b *testing.B, srv *redistest.Server) (calls, usec float64) {
	m := regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=(\d+)`).FindStringSubmatch(srv.Do(b, "INFO", "commandstats"))
	if m == nil {
		b.Fatal("INFO commandstats: no EVALSHA")
	}
	calls, _ = strconv.ParseFloat(m[1], 64)
	usec, _ = strconv.ParseFloat(m[2], 64)
	return calls, usec
}
