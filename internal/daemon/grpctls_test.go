package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"google.golang.org/grpc/health"

	"github.com/sluicehq/sluice/internal/daemontest"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/testpki"
)

// tlsFiles writes a server pair and a client CA (if not nil) into dir and
// returns the options that name them.
func tlsFiles(t *testing.T, dir string, server testpki.Leaf, clientCA *testpki.CA) GRPCTLSOptions {
	t.Helper()
	o := GRPCTLSOptions{Use: true}
	o.Cert, o.Key, o.ClientCA = daemontest.TLSFiles(t, dir, server, clientCA)
	return o
}

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// serveTLSHealth serves gRPC's health service with the credentials of g
// on a loopback port and returns its address.
func serveTLSHealth(t *testing.T, g *GRPCTLS) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(g.ServerOption())
	healthpb.RegisterHealthServer(s, health.NewServer())
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// healthCheck calls the health service at addr over TLS trusting
// serverCA, with the client certificate cert when it is not nil, and
// returns the error and the server's leaf certificate.
func healthCheck(t *testing.T, addr string, serverCA *testpki.CA, cert *tls.Certificate) (*x509.Certificate, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(serverCA.Cert)
	var seen *x509.Certificate
	var mu sync.Mutex
	cfg := &tls.Config{RootCAs: pool, ServerName: "sluice.test", VerifyConnection: func(cs tls.ConnectionState) error {
		mu.Lock()
		defer mu.Unlock()
		seen = cs.PeerCertificates[0]
		return nil
	}}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	err := healthOverTLS(t, addr, cfg)
	mu.Lock()
	defer mu.Unlock()
	return seen, err
}

// healthOverTLS makes one health check at addr over TLS with cfg, on a
// connection of its own, within 5 seconds, and returns its error.
func healthOverTLS(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	conn := daemontest.Dial(t, addr, credentials.NewTLS(cfg))
	defer conn.Close()
	return daemontest.CheckHealth(conn, 5*time.Second)
}

// checkServed checks that a health check at addr by a client trusting
// serverCA and presenting cert (none when nil) is served when want is
// true, refused otherwise; who names the client in a failure.
func checkServed(t *testing.T, addr string, serverCA *testpki.CA, cert *tls.Certificate, want bool, who string) {
	t.Helper()
	_, err := healthCheck(t, addr, serverCA, cert)
	switch {
	case want && err != nil:
		t.Errorf("%s: %v", who, err)
	case !want && err == nil:
		t.Errorf("%s was served", who)
	}
}

// With GRPC_CLIENT_TLS_CACERT, a client without a certificate is refused
// and one with a certificate from that CA is served; one from another CA
// is refused.
func TestGRPCmTLSRefusesAClientWithoutACertificate(t *testing.T) {
	serverCA, clientCA, otherCA := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "client CA"), testpki.NewCA(t, "other CA")
	o := tlsFiles(t, t.TempDir(), serverCA.Issue(t, "sluice", false, "sluice.test"), clientCA)
	g, err := NewGRPCTLS(context.Background(), o, daemontest.QuietLogger(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLSHealth(t, g)
	checkServed(t, addr, serverCA, nil, false, "a client without a certificate")
	other := otherCA.Issue(t, "envoy", true, "envoy.test")
	checkServed(t, addr, serverCA, &other.Pair, false, "a client with a certificate of another CA")
	good := clientCA.Issue(t, "envoy", true, "envoy.test")
	checkServed(t, addr, serverCA, &good.Pair, true, "a client with a certificate of the client CA")
}

// With GRPC_CLIENT_TLS_SAN, the client's certificate must carry that SAN
// (a DNS name, or a URI such as a SPIFFE ID), even when the CA signed it.
func TestGRPCmTLSRequiresTheClientSAN(t *testing.T) {
	for _, san := range []string{"envoy.test", "spiffe://cluster.local/ns/gw/sa/envoy"} {
		t.Run(san, func(t *testing.T) {
			serverCA, clientCA := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "client CA")
			o := tlsFiles(t, t.TempDir(), serverCA.Issue(t, "sluice", false, "sluice.test"), clientCA)
			o.ClientSAN = san
			g, err := NewGRPCTLS(context.Background(), o, daemontest.QuietLogger(), time.Now)
			if err != nil {
				t.Fatal(err)
			}
			addr := serveTLSHealth(t, g)
			wrong := clientCA.Issue(t, "other", true, "other.test", "spiffe://cluster.local/ns/x/sa/other")
			checkServed(t, addr, serverCA, &wrong.Pair, false, "a client certificate without the SAN")
			right := clientCA.Issue(t, "envoy", true, san)
			checkServed(t, addr, serverCA, &right.Pair, true, "a client certificate with the SAN")
		})
	}
}

// A certificate, key and client CA replaced on disk are served without a
// restart, once a second has passed since the files were last looked at;
// a bad replacement keeps the running certificate and is logged.
func TestGRPCTLSPicksUpReplacedCertificates(t *testing.T) {
	serverCA, clientCA := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "client CA")
	dir := t.TempDir()
	first := serverCA.Issue(t, "first", false, "sluice.test")
	o := tlsFiles(t, dir, first, clientCA)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	var logs testlog.Buffer
	g, err := NewGRPCTLS(context.Background(), o, slog.New(slog.NewTextHandler(&logs, nil)), clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLSHealth(t, g)
	client := clientCA.Issue(t, "envoy", true, "envoy.test")
	served := func() string {
		t.Helper()
		c, err := healthCheck(t, addr, serverCA, &client.Pair)
		if err != nil {
			t.Fatalf("health check: %v", err)
		}
		return c.Subject.CommonName
	}
	if got := served(); got != "first" {
		t.Fatalf("served %q, want first", got)
	}

	second := serverCA.Issue(t, "second", false, "sluice.test")
	daemontest.WriteAtomic(t, o.Cert, string(second.CertPEM))
	daemontest.WriteAtomic(t, o.Key, string(second.KeyPEM))
	clock.Add(500 * time.Millisecond)
	if got := served(); got != "first" {
		t.Errorf("within a second of the last look: served %q, want first (files are looked at once a second at most)", got)
	}
	clock.Add(600 * time.Millisecond)
	if got := served(); got != "second" {
		t.Errorf("after the files were replaced: served %q, want second", got)
	}

	// A key that does not match: the running pair stays, and it is logged.
	daemontest.WriteAtomic(t, o.Key, string(serverCA.Issue(t, "third", false, "sluice.test").KeyPEM))
	clock.Add(2 * time.Second)
	if got := served(); got != "second" {
		t.Errorf("after a bad replacement: served %q, want second", got)
	}
	if !strings.Contains(logs.String(), "keeping the running") {
		t.Errorf("the bad replacement was not logged: %s", logs.String())
	}

	// A new client CA: the old CA's clients are refused, the new one's served.
	newCA := testpki.NewCA(t, "new client CA")
	daemontest.WriteAtomic(t, o.Key, string(second.KeyPEM))
	daemontest.WriteAtomic(t, o.ClientCA, string(newCA.PEM))
	clock.Add(2 * time.Second)
	checkServed(t, addr, serverCA, &client.Pair, false, "after the client CA was replaced, a client of the old CA")
	newClient := newCA.Issue(t, "envoy", true, "envoy.test")
	checkServed(t, addr, serverCA, &newClient.Pair, true, "after the client CA was replaced, a client of the new CA")
}

// A bad certificate at start-up is an error (serve exits), and so are a
// file that is not a regular one and a file over the size cap.
func TestGRPCTLSRefusesBadFilesAtStartUp(t *testing.T) {
	serverCA := testpki.NewCA(t, "server CA")
	good := serverCA.Issue(t, "sluice", false, "sluice.test")
	cases := map[string]func(o *GRPCTLSOptions){
		"missing key": func(o *GRPCTLSOptions) { o.Key = filepath.Join(filepath.Dir(o.Key), "nope") },
		"key of another": func(o *GRPCTLSOptions) {
			daemontest.WriteAtomic(t, o.Key, string(serverCA.Issue(t, "x", false).KeyPEM))
		},
		"a directory": func(o *GRPCTLSOptions) { o.Cert = filepath.Dir(o.Cert) },
		"too large":   func(o *GRPCTLSOptions) { daemontest.WriteAtomic(t, o.Cert, string(make([]byte, MaxTLSFileBytes+1))) },
		"CA without a certificate": func(o *GRPCTLSOptions) {
			o.ClientCA = filepath.Join(filepath.Dir(o.Cert), "ca.crt")
			daemontest.WriteAtomic(t, o.ClientCA, string([]byte("not PEM\n")))
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			o := tlsFiles(t, t.TempDir(), good, nil)
			spoil(&o)
			if _, err := NewGRPCTLS(context.Background(), o, daemontest.QuietLogger(), time.Now); err == nil {
				t.Error("no error")
			}
		})
	}
}

// The settings that make no sense together are refused, rather than one
// of them ignored: TLS without its pair, and a client CA or SAN without
// TLS (which would serve plaintext to a client the operator meant to
// verify), or a SAN without a CA (which would check nothing).
func TestGRPCTLSOptionsCheck(t *testing.T) {
	for _, c := range []struct {
		o  GRPCTLSOptions
		ok bool
	}{
		{GRPCTLSOptions{}, true},
		{GRPCTLSOptions{Use: true, Cert: "c", Key: "k"}, true},
		{GRPCTLSOptions{Use: true, Cert: "c", Key: "k", ClientCA: "ca", ClientSAN: "s"}, true},
		{GRPCTLSOptions{Cert: "c", Key: "k"}, true}, // named in the start-up line instead
		{GRPCTLSOptions{Use: true, Cert: "c"}, false},
		{GRPCTLSOptions{Use: true, Key: "k"}, false},
		{GRPCTLSOptions{ClientCA: "ca"}, false},
		{GRPCTLSOptions{ClientSAN: "s"}, false},
		{GRPCTLSOptions{Use: true, Cert: "c", Key: "k", ClientSAN: "s"}, false},
	} {
		if err := c.o.check(); (err == nil) != c.ok {
			t.Errorf("%+v: check() = %v, want ok %v", c.o, err, c.ok)
		}
	}
	if got := (GRPCTLSOptions{Cert: "c", Key: "k"}).notActedOn(); strings.Join(got, ",") != "-grpc-tls-cert,-grpc-tls-key" {
		t.Errorf("cert and key without TLS: notActedOn() = %v", got)
	}
}

// A client whose CA was replaced is refused even when it resumes a TLS
// session from before the replacement: crypto/tls checks a resumed
// session's chains against the running config's client CAs, which must
// stay so.
func TestGRPCmTLSDoesNotResumeAcrossACARotation(t *testing.T) {
	serverCA, clientCA := testpki.NewCA(t, "server CA"), testpki.NewCA(t, "client CA")
	o := tlsFiles(t, t.TempDir(), serverCA.Issue(t, "sluice", false, "sluice.test"), clientCA)
	clock := &fakeClock{now: time.Unix(1_000_000, 0)}
	g, err := NewGRPCTLS(context.Background(), o, daemontest.QuietLogger(), clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLSHealth(t, g)
	pool := x509.NewCertPool()
	pool.AddCert(serverCA.Cert)
	client := clientCA.Issue(t, "envoy", true, "envoy.test")
	cfg := &tls.Config{RootCAs: pool, ServerName: "sluice.test", Certificates: []tls.Certificate{client.Pair},
		ClientSessionCache: tls.NewLRUClientSessionCache(8)}
	check := func() error { return healthOverTLS(t, addr, cfg) }
	if err := check(); err != nil {
		t.Fatal(err)
	}
	daemontest.WriteAtomic(t, o.ClientCA, string(testpki.NewCA(t, "new client CA").PEM))
	clock.Add(2 * time.Second)
	if err := check(); err == nil {
		t.Error("after the client CA was replaced, a client of the old CA was served (a resumed session?)")
	}
}
