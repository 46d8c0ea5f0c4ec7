package rlqs_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	rlqspb "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/sluicehq/sluice/internal/rlqstest"
	"github.com/sluicehq/sluice/internal/testpki"
	"github.com/sluicehq/sluice/rlqs"
)

// serveLoopback serves s on a loopback gRPC listener and returns a client
// connection to it.
func serveLoopback(t *testing.T, s *rlqs.Server) *grpc.ClientConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	s.Register(gs)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// dialer opens RLQS streams on cc as the named client.
func dialer(ctx context.Context, cc *grpc.ClientConn, name string) func() (rlqstest.Conn, error) {
	return func() (rlqstest.Conn, error) {
		ctx := metadata.AppendToOutgoingContext(ctx, rlqs.ClientHeader, name)
		return rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	}
}

// eventually polls cond every 10 ms until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after 10 s: %s", what)
		}
	}
}

func TestThreeEnvoysOverLoopbackGRPCShareTheLimit(t *testing.T) {
	s := newServer(t, nil)
	cc := serveLoopback(t, s)
	var clients []*rlqstest.Client
	for _, name := range []string{"a", "b", "c"} {
		c := rlqstest.New(rlqstest.Settings{Domain: "edge", ReportingInterval: 200 * time.Millisecond}, dialer(t.Context(), cc, name))
		defer c.Close()
		clients = append(clients, c)
		c.Request(apiBucket)
	}
	eventually(t, "the three Envoys hold a third of 100/s each", func() bool {
		for _, c := range clients {
			if r := c.Rate(apiBucket); r < 30 || r > 34 {
				return false
			}
		}
		return true
	})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "Shutdown's assignments expire at once", func() bool {
		for _, c := range clients {
			if _, exp := c.Strategy(apiBucket); exp.After(time.Now()) {
				return false
			}
		}
		return true
	})
}

// Over mTLS, a name belongs to the client certificate that claims it:
// two Envoys of one host with different certificates and the same
// sluice-rlqs-client name are two clients, and the end of one leaves the
// other's record.
func TestANameOverMTLSBelongsToItsCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "rlqs-test-ca")
	srvLeaf := ca.Issue(t, "sluice", false, "127.0.0.1")
	st := &rlqs.MemoryStore{}
	s := newServerWith(t, rlqs.Config{Store: st})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{srvLeaf.Pair},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12})))
	s.Register(gs)
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	ctx := metadata.AppendToOutgoingContext(t.Context(), rlqs.ClientHeader, "envoy-1")
	openAs := func(l testpki.Leaf) rlqspb.RateLimitQuotaService_StreamRateLimitQuotasClient {
		cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
			RootCAs: ca.Pool(), Certificates: []tls.Certificate{l.Pair}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12})))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		str, err := rlqspb.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := str.Send(reports(usage(apiBucket, 0, 1, 0))); err != nil {
			t.Fatal(err)
		}
		if _, err := str.Recv(); err != nil {
			t.Fatal(err)
		}
		return str
	}
	openAs(ca.Issue(t, "envoy-a", true, "spiffe://edge/envoy-a"))
	b := openAs(ca.Issue(t, "envoy-b", true, "spiffe://edge/envoy-b"))
	if n := records(t, st); n != 2 {
		t.Errorf("%d records for two certificates claiming one name, want 2", n)
	}
	_ = b.CloseSend()
	for {
		if _, err := b.Recv(); err != nil {
			break
		}
	}
	if n := records(t, st); n != 1 {
		t.Errorf("%d records after the second certificate's stream ended, want the first one's (1)", n)
	}
}
