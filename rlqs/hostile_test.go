package rlqs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/internal/rlqstest"
	"github.com/sluicehq/sluice/rlqs"
)

// The hostile cases of RLQS beside badstream_test.go's malformed ones:
// memory, stream caps, lying reports, impostors, idle streams.

// newServerWith returns a server on edgeYAML with cfg's settings.
func newServerWith(t testing.TB, cfg rlqs.Config) *rlqs.Server {
	t.Helper()
	c := configtest.Parse(t, edgeYAML)
	cfg.Rules = func() *config.Config { return c }
	s, err := rlqs.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fromPeer returns ctx with a TCP peer at addr (ip:port), as gRPC gives a
// stream's context; cert, when not nil, is its verified client
// certificate.
func fromPeer(ctx context.Context, addr string, cert *x509.Certificate) context.Context {
	p := &peer.Peer{Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr))}
	if cert != nil {
		p.AuthInfo = credentials.TLSInfo{State: tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert}}}}
	}
	return peer.NewContext(ctx, p)
}

// reports returns a message of the domain edge with us.
func reports(us ...*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage) *rlqspb.RateLimitQuotaUsageReports {
	return &rlqspb.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: us}
}

// drain reads conn until it ends and returns how it ended.
func drain(conn rlqstest.Conn) error {
	for {
		if _, err := conn.Recv(); err != nil {
			return err
		}
	}
}

// open opens a stream and sends its first report; it returns the stream,
// or the status it was refused with.
func open(ctx context.Context, s *rlqs.Server, md metadata.MD) (rlqstest.Conn, error) {
	conn := rlqstest.Pipe(ctx, md, s.StreamRateLimitQuotas)
	_ = conn.Send(reports(usage(apiBucket, 0, 1, 0))) // a refused stream's status comes with Recv
	if _, err := conn.Recv(); err != nil {
		return nil, err
	}
	return conn, nil
}

// bigID returns a bucket id of the largest size a report may send (8
// pairs of 256-byte keys and values), distinct for (stream, n); no rule
// matches it.
func bigID(stream, n int) map[string]string {
	id := make(map[string]string, config.MaxBucketPairs)
	for p := range config.MaxBucketPairs {
		k := fmt.Sprintf("k%d-%d-%d-", p, stream, n)
		id[k+strings.Repeat("k", rlqs.MaxPairBytes-len(k))] = strings.Repeat("v", rlqs.MaxPairBytes)
	}
	return id
}

// heapBytes returns the live heap after a collection.
func heapBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Many streams with the largest buckets against a 1 MiB budget: the
// accounted bytes and the heap stay within it, a new bucket past it gets
// no assignment while the stream's others keep theirs, and a new stream
// past it is refused with ResourceExhausted.
func TestTheMemoryBudgetBoundsStreamsAndBuckets(t *testing.T) {
	const budget = 1 << 20
	const streams, rounds, perMsg = 16, 4, 25
	reg := prometheus.NewRegistry()
	s := newServerWith(t, rlqs.Config{MaxBytes: budget, Registerer: reg})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	heap0 := heapBytes()
	var conns []rlqstest.Conn
	var refused []error
	subscribed := 0
	for i := range streams {
		conn, err := open(ctx, s, nil)
		if err != nil {
			refused = append(refused, err)
			continue
		}
		conns = append(conns, conn)
		for r := range rounds {
			us := []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(apiBucket, time.Second, 1, 0)}
			for n := range perMsg {
				us = append(us, usage(bigID(i, r*perMsg+n), 0, 1, 0))
			}
			if err := conn.Send(reports(us...)); err != nil {
				t.Fatalf("stream %d: %v", i, err)
			}
			m, err := conn.Recv()
			if err != nil {
				t.Fatalf("stream %d ended with %v past the budget, want it kept for its existing buckets", i, err)
			}
			if len(m.GetBucketAction()) == 0 || m.GetBucketAction()[0].GetBucketId().GetBucket()["api"] != "v1" {
				t.Fatalf("stream %d: the existing bucket got no assignment past the budget", i)
			}
			subscribed += len(m.GetBucketAction()) - 1
		}
	}
	heap := heapBytes() - heap0
	t.Logf("%d streams kept, %d refused; %d of %d big buckets subscribed; heap +%d bytes (budget %d)",
		len(conns), len(refused), subscribed, streams*rounds*perMsg, heap, budget)
	used := promtest.Value(t, reg, "sluice_rlqs_memory_bytes", "", "")
	t.Logf("accounted %.0f bytes", used)
	if used <= 0 || used > budget {
		t.Errorf("sluice_rlqs_memory_bytes %.0f, want within (0, %d]", used, budget)
	}
	if heap > 2*budget {
		t.Errorf("the heap grew by %d bytes, want at most twice the %d-byte budget", heap, budget)
	}
	if subscribed == streams*rounds*perMsg {
		t.Errorf("all %d big buckets were subscribed, want those past the budget refused", subscribed)
	}
	if len(refused) == 0 {
		t.Errorf("no stream was refused past the budget")
	}
	for _, err := range refused {
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "memory budget") {
			t.Errorf("a stream past the budget ended with %v, want ResourceExhausted naming the memory budget", err)
		}
	}
	for _, c := range conns {
		_ = c.CloseSend()
		_ = drain(c)
	}
	if used := promtest.Value(t, reg, "sluice_rlqs_memory_bytes", "", ""); used != 0 {
		t.Errorf("after every stream ended, sluice_rlqs_memory_bytes %.0f, want 0", used)
	}
}

// The global and per-connection stream caps refuse the stream past them
// with ResourceExhausted; a stream that ends makes room.
func TestStreamCapsRefuseTheStreamPastThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServerWith(t, rlqs.Config{MaxStreams: 4, MaxStreamsPerConn: 2})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		conn1 := fromPeer(ctx, "10.0.0.1:5000", nil)
		a, err := open(conn1, s, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := open(conn1, s, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := open(conn1, s, nil); status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a third stream on one connection (cap 2): %v, want ResourceExhausted", err)
		}
		for i := range 2 {
			if _, err := open(fromPeer(ctx, fmt.Sprintf("10.0.0.1:%d", 6000+i), nil), s, nil); err != nil {
				t.Fatalf("a stream on another connection: %v", err)
			}
		}
		_, err = open(fromPeer(ctx, "10.0.0.2:5000", nil), s, nil)
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("a fifth stream (cap 4): %v, want ResourceExhausted", err)
		}
		t.Logf("refused: %v", err)
		_ = a.CloseSend()
		_ = drain(a)
		if _, err := open(fromPeer(ctx, "10.0.0.2:5000", nil), s, nil); err != nil {
			t.Errorf("a stream after one ended: %v, want it served", err)
		}
		cancel()
		synctest.Wait()
	})
}

// rate returns the requests per second of a token bucket action.
func rate(a *rlqspb.RateLimitQuotaResponse_BucketAction) float64 {
	tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb == nil {
		return 0
	}
	return float64(tb.GetTokensPerFill().GetValue()) / tb.GetFillInterval().AsDuration().Seconds()
}

// 99 streams of one peer reporting 1e6 requests per millisecond leave an
// honest Envoy of another peer at least the floor docs/rlqs.md states,
// limit×(1−reserve)/peers, and their reports count at most 10 times the
// rule's rate.
func TestLyingStreamsOfOnePeerLeaveAnotherPeerItsFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		s := newServerWith(t, rlqs.Config{Registerer: reg})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		for i := range 99 {
			conn := rlqstest.Pipe(fromPeer(ctx, fmt.Sprintf("10.0.0.66:%d", 40000+i), nil), nil, s.StreamRateLimitQuotas)
			go func() { _ = drain(conn) }()
			_ = conn.Send(reports(usage(apiBucket, 0, 1, 0)))
			_ = conn.Send(reports(usage(apiBucket, time.Millisecond, 1e6, 0)))
		}
		synctest.Wait()
		honest := rlqstest.Pipe(fromPeer(ctx, "10.0.0.1:5000", nil), metadata.Pairs(rlqs.ClientHeader, "envoy-1"), s.StreamRateLimitQuotas)
		var got float64
		for _, u := range []*rlqspb.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(apiBucket, 0, 1, 0), usage(apiBucket, time.Second, 100, 0)} {
			if err := honest.Send(reports(u)); err != nil {
				t.Fatal(err)
			}
			m, err := honest.Recv()
			if err != nil {
				t.Fatal(err)
			}
			got = rate(m.GetBucketAction()[0])
		}
		floor := 100 * (1 - 0.05) / 2
		if got < 0.99*floor {
			t.Errorf("the honest Envoy holds %.2f/s, want at least the floor %.2f/s (limit×(1−reserve)/peers, less 1%% of rounding)", got, floor)
		}
		synctest.Wait()
		reported := gauges(t, reg, "|3:api=v1")["sluice_rlqs_bucket_reported_requests_per_second"]
		if limit := 99*10*100.0 + 100; reported > limit {
			t.Errorf("the bucket's reported rate is %.3g/s, want each report counted at most 10×100/s (%v in all)", reported, limit)
		}
		t.Logf("honest share %.2f/s, reported %.3g/s", got, reported)
		cancel()
		synctest.Wait()
	})
}

// records returns the clients with a record of apiBucket in st.
func records(t *testing.T, st *rlqs.MemoryStore) int {
	t.Helper()
	m, err := st.Demands(t.Context(), "edge|3:api=v1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func certFor(uri string) *x509.Certificate {
	u, _ := url.Parse(uri)
	return &x509.Certificate{Subject: pkix.Name{CommonName: "envoy"}, URIs: []*url.URL{u}}
}

// A name (ClientHeader) is scoped by the peer: a stream of another peer
// (another IP address, or another verified certificate) with the same
// name is another client, and its end does not forget the named client's
// record. With IgnoreClientNames, the name is not read at all.
func TestAnImpostorCannotEndANamedClientsRecord(t *testing.T) {
	for _, tc := range []struct {
		name          string
		cfg           rlqs.Config
		real, fake    string
		rcert, fcert  *x509.Certificate
		both, afterFk int // records while both are open, after the impostor ended
	}{
		{"another address", rlqs.Config{}, "10.0.0.1:5000", "10.0.0.9:5000", nil, nil, 2, 1},
		{"another certificate", rlqs.Config{}, "10.0.0.1:5000", "10.0.0.1:6000", certFor("spiffe://edge/envoy-1"), certFor("spiffe://edge/other"), 2, 1},
		{"the same certificate elsewhere is the client", rlqs.Config{}, "10.0.0.1:5000", "10.0.0.7:6000", certFor("spiffe://edge/envoy-1"), certFor("spiffe://edge/envoy-1"), 1, 0},
		{"names off", rlqs.Config{IgnoreClientNames: true}, "10.0.0.1:5000", "10.0.0.1:6000", nil, nil, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &rlqs.MemoryStore{}
				tc.cfg.Store = st
				s := newServerWith(t, tc.cfg)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				md := metadata.Pairs(rlqs.ClientHeader, "envoy-1")
				if _, err := open(fromPeer(ctx, tc.real, tc.rcert), s, md); err != nil {
					t.Fatal(err)
				}
				fake, err := open(fromPeer(ctx, tc.fake, tc.fcert), s, md)
				if err != nil {
					t.Fatal(err)
				}
				if n := records(t, st); n != tc.both {
					t.Errorf("%d records while both streams are open, want %d", n, tc.both)
				}
				_ = fake.CloseSend()
				_ = drain(fake)
				synctest.Wait()
				if n := records(t, st); n != tc.afterFk {
					t.Errorf("%d records after the second stream ended, want %d", n, tc.afterFk)
				}
				cancel()
				synctest.Wait()
			})
		})
	}
}

// A stream that reports every 5 s lives on; one that stops reporting
// ends with DeadlineExceeded after the idle timeout (30 s by default).
func TestAStreamThatStopsReportingEndsAfterTheIdleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newServer(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		conn := rlqstest.Pipe(ctx, nil, s.StreamRateLimitQuotas)
		errc := make(chan error, 1)
		go func() { errc <- drain(conn) }()
		for range 12 { // a minute of reports, twice the idle timeout
			if err := conn.Send(reports(usage(apiBucket, 5*time.Second, 10, 0))); err != nil {
				t.Fatalf("a stream reporting every 5 s ended: %v", err)
			}
			time.Sleep(5 * time.Second)
		}
		silent := time.Now()
		select {
		case err := <-errc:
			if status.Code(err) != codes.DeadlineExceeded || time.Since(silent) > 30*time.Second {
				t.Errorf("after %v without a report the stream ended with %v, want DeadlineExceeded at 30s", time.Since(silent), err)
			}
		case <-time.After(5 * time.Minute):
			t.Errorf("the stream is still open after 5 minutes without a report, want it ended after 30s")
		}
		cancel()
		synctest.Wait()
	})
}

// A report's requests count over the time since the stream's previous
// report of the bucket when that is longer than the time_elapsed it
// claims: a client reporting 50 requests a second apart while claiming
// 1 ms counts 50/s, not 50,000/s (which the bound of 10 times the rule's
// 100/s would have counted as 1,000/s). Its first report, with no report
// before it on the stream, counts as it claims.
func TestAReportCountsNoFasterThanTheTimeSinceTheLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		s := newServerWith(t, rlqs.Config{Registerer: reg})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		conn := rlqstest.Pipe(fromPeer(ctx, "10.0.0.66:40000", nil), nil, s.StreamRateLimitQuotas)
		go func() { _ = drain(conn) }()
		reported := func() float64 {
			synctest.Wait()
			return gauges(t, reg, "|3:api=v1")["sluice_rlqs_bucket_reported_requests_per_second"]
		}
		_ = conn.Send(reports(usage(apiBucket, time.Millisecond, 50, 0)))
		if got := reported(); got != 1000 {
			t.Errorf("a first report of 50 in 1 ms counts %.6g/s, want the bound 10×100/s", got)
		}
		for i := range 3 {
			time.Sleep(time.Second)
			_ = conn.Send(reports(usage(apiBucket, time.Millisecond, 50, 0)))
			if got := reported(); got != 50 {
				t.Errorf("report %d, a second after the last, of 50 in a claimed 1 ms counts %.6g/s, want 50/s", i+2, got)
			}
		}
		cancel()
		synctest.Wait()
	})
}
