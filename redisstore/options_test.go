package redisstore_test

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testpki"
	"github.com/sluicehq/sluice/redisstore"
)

// Config.Connections bounds the connections the store opens to a node for
// its decisions (envoyproxy/ratelimit's REDIS_POOL_SIZE), rounded down to
// a power of two: concurrent decisions over 1 use one connection, over 10
// use 8.
func TestConnections(t *testing.T) {
	for _, tt := range []struct{ conns, want int }{{1, 1}, {2, 2}, {10, 8}} {
		srv := redistest.StartServer(t)
		s, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://" + srv.Addr, Connections: tt.conns})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 400 {
			wg.Go(func() {
				if _, err := s.Allow(context.Background(), "conns:"+strconv.Itoa(i), sluice.PerSecond(10)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// CLIENT LIST's own connection is one of the lines.
		got := strings.Count(strings.TrimSpace(srv.Do(t, "CLIENT", "LIST")), "\n")
		if got != tt.want {
			t.Errorf("Connections %d: %d connections, want %d", tt.conns, got, tt.want)
		}
		s.Close()
	}
}

// A sentinel that requires a password (envoyproxy/ratelimit's
// REDIS_SENTINEL_AUTH) is reached with Config.SentinelPassword, and without
// it the store cannot find the master.
func TestSentinelAuth(t *testing.T) {
	master := redistest.StartServer(t)
	sentinel := redistest.StartSentinel(t, master, "m")
	sentinel.Do(t, "ACL", "SETUSER", "default", "resetpass", ">sentinel-pass")
	url := "redis+sentinel://" + sentinel.Addr + "/m"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.New(ctx, redisstore.Config{URL: url, SentinelPassword: "sentinel-pass"})
	if err != nil {
		t.Fatalf("New with the sentinel's password: %v", err)
	}
	defer s.Close()
	if r, err := s.Allow(ctx, "sentinel-auth", sluice.PerSecond(1)); err != nil || !r.Allowed {
		t.Fatalf("decision: %+v, %v", r, err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel2()
	if s, err := redisstore.New(short, redisstore.Config{URL: url}); err == nil {
		s.Close()
		t.Fatal("New without the sentinel's password: no error")
	}
}

// pki is a certificate authority and, signed by it, a server certificate
// for 127.0.0.1 (no host name) and a client certificate, as PEM files
// (internal/testpki's).
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func makePKI(t *testing.T, dir string) pki {
	t.Helper()
	ca := testpki.NewCA(t, "test CA")
	var p pki
	p.ca = ca.WriteFile(t, dir, "ca.crt")
	p.serverCert, p.serverKey = ca.Issue(t, "leaf 2", false, "127.0.0.1").WriteFiles(t, dir, "2")
	p.clientCert, p.clientKey = ca.Issue(t, "leaf 3", true).WriteFiles(t, dir, "3")
	return p
}

// startMTLSServer starts a redis-server whose TLS port requires a client
// certificate signed by p's authority, and returns that port's address.
func startMTLSServer(t *testing.T, p pki) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	redistest.StartServer(t, "--tls-port", port, "--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey,
		"--tls-ca-cert-file", p.ca, "--tls-auth-clients", "yes")
	return "127.0.0.1:" + port
}

// envoyproxy/ratelimit's REDIS_TLS_CLIENT_CERT, _KEY and _CACERT through
// LoadTLS: a Redis that requires client certificates serves the store
// that presents one, and refuses one without.
func TestLoadTLSClientCertificate(t *testing.T) {
	p := makePKI(t, t.TempDir())
	addr := startMTLSServer(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	withCert, err := redisstore.LoadTLS(redisstore.TLSFiles{CertFile: p.clientCert, KeyFile: p.clientKey, CAFile: p.ca})
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.New(ctx, redisstore.Config{URL: "rediss://" + addr, TLS: withCert})
	if err != nil {
		t.Fatalf("New with a client certificate: %v", err)
	}
	defer s.Close()
	if r, err := s.Allow(ctx, "mtls", sluice.PerSecond(1)); err != nil || !r.Allowed {
		t.Fatalf("decision over mTLS: %+v, %v", r, err)
	}
	caOnly, err := redisstore.LoadTLS(redisstore.TLSFiles{CAFile: p.ca})
	if err != nil {
		t.Fatal(err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel2()
	if s, err := redisstore.New(short, redisstore.Config{URL: "rediss://" + addr, TLS: caOnly}); err == nil {
		s.Close()
		t.Fatal("New without a client certificate on a server that requires one: no error")
	}
}

// REDIS_TLS_SKIP_HOSTNAME_VERIFICATION: the certificate's chain is still
// verified, only its name is not. The server's certificate is for
// 127.0.0.1, reached here as localhost.
func TestLoadTLSSkipHostnameVerification(t *testing.T) {
	p := makePKI(t, t.TempDir())
	addr := startMTLSServer(t, p)
	url := "rediss://localhost:" + addr[strings.LastIndexByte(addr, ':')+1:]
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	files := redisstore.TLSFiles{CertFile: p.clientCert, KeyFile: p.clientKey, CAFile: p.ca}
	for _, tt := range []struct {
		name string
		skip bool
		ca   string
		ok   bool
	}{
		{"name checked", false, p.ca, false},
		{"name skipped", true, p.ca, true},
		{"name skipped, another authority", true, makePKI(t, t.TempDir()).ca, false},
	} {
		f := files
		f.SkipHostnameVerification, f.CAFile = tt.skip, tt.ca
		c, err := redisstore.LoadTLS(f)
		if err != nil {
			t.Fatal(err)
		}
		s, err := redisstore.New(ctx, redisstore.Config{URL: url, TLS: c})
		if (err == nil) != tt.ok {
			t.Errorf("%s: New error %v, want success %v", tt.name, err, tt.ok)
		}
		if err == nil {
			s.Close()
		}
	}
}

// LoadTLS names the file it cannot use.
func TestLoadTLSErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o600)
	fifo := filepath.Join(dir, "fifo.pem") // no writer: opening it for reading would wait for ever
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tt := range []struct {
		f    redisstore.TLSFiles
		name string // what the error must name
	}{
		{redisstore.TLSFiles{CAFile: missing}, missing},
		{redisstore.TLSFiles{CAFile: bad}, bad},
		{redisstore.TLSFiles{CertFile: bad, KeyFile: bad}, bad},
		{redisstore.TLSFiles{CertFile: bad}, "key file"},
		{redisstore.TLSFiles{CAFile: fifo}, fifo},
		{redisstore.TLSFiles{CertFile: fifo, KeyFile: bad}, fifo},
		{redisstore.TLSFiles{CertFile: bad, KeyFile: fifo}, fifo},
	} {
		_, err := redisstore.LoadTLS(tt.f)
		if err == nil || !strings.Contains(err.Error(), tt.name) {
			t.Errorf("LoadTLS(%+v) = %v, want an error naming %s", tt.f, err, tt.name)
		}
	}
}

// A store on a caller's Client does not open connections, so the options
// that say how to open them are refused rather than ignored: each one is
// an error that names it, and the store is not made.
func TestClientRefusesConnectionOptions(t *testing.T) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{redistest.Single(t).Addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for name, cfg := range map[string]redisstore.Config{
		"URL":              {URL: "redis://elsewhere:6379"},
		"TLS":              {TLS: &tls.Config{}},
		"Connections":      {Connections: 4},
		"FlushDelay":       {FlushDelay: time.Millisecond},
		"Timeout":          {Timeout: time.Second},
		"SentinelUsername": {SentinelUsername: "u"},
		"SentinelPassword": {SentinelPassword: "p"},
	} {
		cfg.Client = c
		s, err := redisstore.New(context.Background(), cfg)
		if err == nil {
			s.Close()
			t.Errorf("Client with %s: no error", name)
		} else if !strings.Contains(err.Error(), name) {
			t.Errorf("Client with %s: error %q does not name it", name, err)
		}
	}
}
