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
	for _, tc := range []struct{ shared, redis bool }{{true, false}, {false, false}, {true, true}} {
		t.Run(fmt.Sprintf("one bucket shared by all: %v, Redis: %v", tc.shared, tc.redis), func(t *testing.T) {
			var st rlqs.Store
			if tc.redis {
				st = redisRLQS(t)
			}
			s := newServer(t, st)
			g0 := runtime.NumGoroutine()
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r := newLoadRig(t, s, 1000, tc.shared)
			r.subscribe(t)
			time.Sleep(2 * time.Second)
			runtime.GC()
			runtime.ReadMemStats(&after)
			t.Logf("reassignments pushed while the %d streams subscribed: %d", len(r.streams), r.pushes())
			t.Logf("%d streams held: %d goroutines more, %.1f MiB more heap (server and clients in one process)",
				len(r.streams), runtime.NumGoroutine()-g0, float64(after.HeapAlloc-before.HeapAlloc)/(1<<20))
			c, all := r.run(t, 15*time.Second, 5*time.Second)
			t.Logf("at Envoy's pace (each every 5 s): %d reports in 15 s (%.0f/s); report→assignment p50 %v p99 %v max %v",
				c, float64(c)/15, pct(all, .5), pct(all, .99), all[len(all)-1])
			t.Logf("reassignments pushed at Envoy's pace: %d", r.pushes())
			c, all = r.run(t, 5*time.Second, 0)
			t.Logf("flat out: %d reports in 5 s (%.0f/s); report→assignment p50 %v p99 %v max %v",
				c, float64(c)/5, pct(all, .5), pct(all, .99), all[len(all)-1])
			r.close()
		})
	}
}

func pct(all []time.Duration, p float64) time.Duration {
	return all[min(len(all)-1, int(p*float64(len(all))))]
}

// loadRig is n RLQS streams to one server over loopback gRPC. Each
// stream's responses are read as they come, as Envoy does (an unread
// stream stalls on flow control), into got with their arrival times.
type loadRig struct {
	srv     *rlqs.Server
	gs      *grpc.Server
	shared  bool
	cancel  context.CancelFunc
	streams []grpc.BidiStreamingClient[rlqspb.RateLimitQuotaUsageReports, rlqspb.RateLimitQuotaResponse]
	got     []chan time.Time
	conns   []*grpc.ClientConn
}

func newLoadRig(t *testing.T, s *rlqs.Server, n int, shared bool) *loadRig {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &loadRig{srv: s, gs: grpc.NewServer(), shared: shared}
	s.Register(r.gs)
	go func() { _ = r.gs.Serve(ln) }()
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	for i := range n {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		r.conns = append(r.conns, cc)
		sctx := metadata.AppendToOutgoingContext(ctx, rlqs.ClientHeader, fmt.Sprint("envoy-", i))
		st, err := rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(sctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1024)
		go func() {
			defer close(got)
			for {
				if _, err := st.Recv(); err != nil {
					return
				}
				got <- time.Now()
			}
		}()
		r.streams, r.got = append(r.streams, st), append(r.got, got)
	}
	return r
}

// report sends stream i's report and returns the time to the next
// response after it.
func (r *loadRig) report(i int, first bool) (time.Duration, error) {
	m := &rlqspb.RateLimitQuotaUsageReports{}
	if first {
		m.Domain = "edge"
	}
	id := map[string]string{"api": "v1"}
	if !r.shared {
		id["api"] = fmt.Sprint("v", i)
	}
	m.BucketQuotaUsages = []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(id, 5*time.Second, uint64(50+i%100), uint64(i%7))}
	start := time.Now()
	if err := r.streams[i].Send(m); err != nil {
		return 0, err
	}
	for at := range r.got[i] {
		if !at.Before(start) {
			return at.Sub(start), nil
		}
	}
	return 0, fmt.Errorf("stream %d ended", i)
}

// subscribe sends every stream's first report at once.
func (r *loadRig) subscribe(t *testing.T) {
	var wg sync.WaitGroup
	for i := range r.streams {
		wg.Go(func() {
			if _, err := r.report(i, true); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// pushes drains and counts the responses no report waited for.
func (r *loadRig) pushes() (k int) {
	for _, got := range r.got {
		for len(got) > 0 {
			<-got
			k++
		}
	}
	return k
}

// run has every stream report for d, every gap (spread out) or, with gap
// 0, again as soon as it is answered; it returns the reports answered and
// their latencies, sorted.
func (r *loadRig) run(t *testing.T, d, gap time.Duration) (int64, []time.Duration) {
	var count atomic.Int64
	lat := make([][]time.Duration, len(r.streams))
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := range r.streams {
		wg.Go(func() {
			if gap > 0 {
				time.Sleep(time.Duration(i) * gap / time.Duration(len(r.streams)))
			}
			for time.Now().Before(end) {
				l, err := r.report(i, false)
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

// close ends the streams, shuts the server down and stops gRPC.
func (r *loadRig) close() {
	for _, st := range r.streams {
		_ = st.CloseSend()
	}
	r.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
	r.gs.Stop()
	for _, cc := range r.conns {
		_ = cc.Close()
	}
}
