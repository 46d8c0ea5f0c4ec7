package rlqs_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/rlqs"
)

// TestLoadThousandClients measures one Sluice with 1,000 RLQS streams
// over loopback gRPC, each its own connection: the streams held, the
// reports per second answered when every client reports as fast as it is
// answered, and the latency from a report to its assignment, at Envoy's
// pace (every 5 s) and flat out. Set SLUICE_RLQS_LOAD=1 to run it; the
// clients run in the same process, on the same CPUs.
func TestLoadThousandClients(t *testing.T) {
	if os.Getenv("SLUICE_RLQS_LOAD") == "" {
		t.Skip("set SLUICE_RLQS_LOAD=1 to measure 1,000 RLQS clients")
	}
	const n = 1000
	for _, tc := range []struct {
		shared, redis bool
	}{{true, false}, {false, false}, {true, true}} {
		shared := tc.shared
		t.Run(fmt.Sprintf("one bucket shared by all: %v, Redis: %v", tc.shared, tc.redis), func(t *testing.T) {
			var st rlqs.Store
			if tc.redis {
				st = redisRLQS(t)
			}
			s := newServer(t, st)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			gs := grpc.NewServer()
			s.Register(gs)
			go func() { _ = gs.Serve(ln) }()
			defer gs.Stop()
			g0 := runtime.NumGoroutine()
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			streams := make([]grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse], n)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			for i := range streams {
				cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				sctx := metadata.AppendToOutgoingContext(ctx, rlqs.ClientHeader, fmt.Sprint("envoy-", i))
				if streams[i], err = rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(sctx); err != nil {
					t.Fatal(err)
				}
			}
			// Each stream's responses are read as they come, as Envoy
			// does (an unread stream stalls on flow control); a report's
			// latency runs to the next response after it was sent.
			got := make([]chan time.Time, n)
			for i := range streams {
				got[i] = make(chan time.Time, 1024)
				go func() {
					for {
						if _, err := streams[i].Recv(); err != nil {
							close(got[i])
							return
						}
						got[i] <- time.Now()
					}
				}()
			}
			report := func(i int, first bool) (time.Duration, error) {
				m := &rlqspb.RateLimitQuotaUsageReports{}
				if first {
					m.Domain = "edge"
				}
				id := map[string]string{"api": "v1"}
				if !shared {
					id["api"] = fmt.Sprint("v", i)
				}
				m.BucketQuotaUsages = []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(id, 5*time.Second, uint64(50+i%100), uint64(i%7))}
				start := time.Now()
				if err := streams[i].Send(m); err != nil {
					return 0, err
				}
				for at := range got[i] {
					if !at.Before(start) {
						return at.Sub(start), nil
					}
				}
				return 0, fmt.Errorf("stream %d ended", i)
			}
			pushes := func() (k int) {
				for i := range got {
					for len(got[i]) > 0 {
						<-got[i]
						k++
					}
				}
				return k
			}
			// Every stream subscribes.
			var wg sync.WaitGroup
			for i := range streams {
				wg.Go(func() {
					if _, err := report(i, true); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			time.Sleep(2 * time.Second)
			t.Logf("reassignments pushed while the %d streams subscribed: %d", n, pushes())
			t.Logf("%d streams held: %d goroutines more, %.1f MiB more heap (server and clients in one process)",
				n, runtime.NumGoroutine()-g0, float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))
			// Envoy's pace: each stream reports every 5 s, spread out.
			lat := make([][]time.Duration, n)
			run := func(d time.Duration, gap time.Duration) (int64, []time.Duration) {
				var count atomic.Int64
				end := time.Now().Add(d)
				for i := range streams {
					lat[i] = lat[i][:0]
					wg.Go(func() {
						if gap > 0 {
							time.Sleep(time.Duration(i) * gap / n)
						}
						for time.Now().Before(end) {
							l, err := report(i, false)
							if err != nil {
								t.Error(err)
								return
							}
							count.Add(1)
							lat[i] = append(lat[i], l)
							if gap > 0 {
								time.Sleep(gap - l)
							}
						}
					})
				}
				wg.Wait()
				all := slices.Concat(lat...)
				slices.Sort(all)
				return count.Load(), all
			}
			pct := func(all []time.Duration, p float64) time.Duration {
				return all[min(len(all)-1, int(p*float64(len(all))))]
			}
			c, all := run(15*time.Second, 5*time.Second)
			t.Logf("at Envoy's pace (each every 5 s): %d reports in 15 s (%.0f/s); report→assignment p50 %v p99 %v max %v",
				c, float64(c)/15, pct(all, .5), pct(all, .99), all[len(all)-1])
			t.Logf("reassignments pushed at Envoy's pace: %d", pushes())
			c, all = run(5*time.Second, 0)
			t.Logf("flat out: %d reports in 5 s (%.0f/s); report→assignment p50 %v p99 %v max %v",
				c, float64(c)/5, pct(all, .5), pct(all, .99), all[len(all)-1])
			for _, st := range streams {
				_ = st.CloseSend()
			}
			cancel()
			sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer scancel()
			_ = s.Shutdown(sctx)
		})
	}
}
