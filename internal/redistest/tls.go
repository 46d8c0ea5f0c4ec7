package redistest

import (
	"crypto/x509"
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/internal/testpki"
)

// TLSServer is a server that also listens with TLS.
type TLSServer struct {
	*Server
	// TLSAddr is the host:port of the TLS listener.
	TLSAddr string
	// RootCAs holds the certificate authority that signed the server's
	// certificate, for the client's tls.Config.
	RootCAs *x509.CertPool
}

// StartTLSServer starts a dedicated server like StartServer that also
// listens with TLS, on a certificate for 127.0.0.1 signed by a certificate
// authority made for the test. Clients need not present certificates.
func StartTLSServer(t testing.TB) *TLSServer {
	t.Helper()
	tl := need(t, false)
	dir := t.TempDir() // before Cleanup(Close): the server stops before its directory goes
	pool, certFile, keyFile, caFile := makeCerts(t, dir)
	s := &Server{tl: tl, dir: dir, logPath: filepath.Join(dir, "redis.log")}
	tlsPort := 0
	// The TLS port is picked inside the free-port loop, with the main one,
	// so that a TLS port taken before the server binds it is given up too.
	err := s.startOnFreePort(false, func() ([]string, error) {
		p, err := pickPort(false)
		if err != nil {
			return nil, err
		}
		tlsPort = p
		return s.makeArgs(false, []string{"--tls-port", strconv.Itoa(p), "--tls-cert-file", certFile,
			"--tls-key-file", keyFile, "--tls-ca-cert-file", caFile, "--tls-auth-clients", "no"}), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &TLSServer{Server: s, TLSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort)), RootCAs: pool}
}

// makeCerts writes a CA (internal/testpki's) and a server certificate
// for 127.0.0.1 it signed to dir.
func makeCerts(t testing.TB, dir string) (pool *x509.CertPool, certFile, keyFile, caFile string) {
	t.Helper()
	ca := testpki.NewCA(t, "redistest CA")
	certFile, keyFile = ca.Issue(t, "127.0.0.1", false, "127.0.0.1").WriteFiles(t, dir, "server")
	return ca.Pool(), certFile, keyFile, ca.WriteFile(t, dir, "ca.crt")
}
