package xdstest

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"google.golang.org/grpc/credentials"

	"github.com/sluicehq/sluice/internal/testpki"
)

// ServerName is the DNS name in the server certificate of a PKI, not
// resolvable: a client must be told it (a SAN override) to verify the
// server at 127.0.0.1 by name.
const ServerName = "xds.sluice.test"

// PKI is a certificate authority made for a test and the PEM files of a
// server certificate (for ServerName and 127.0.0.1) and a client
// certificate it signed, in a temporary directory.
type PKI struct {
	CAFile, ServerCert, ServerKey, ClientCert, ClientKey string

	pool   *x509.CertPool
	server tls.Certificate
}

// NewPKI makes the certificates (internal/testpki's).
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "xdstest CA")
	srv := ca.Issue(t, ServerName, false, ServerName, "127.0.0.1")
	p := &PKI{CAFile: ca.WriteFile(t, dir, "ca.pem"), pool: ca.Pool(), server: srv.Pair}
	p.ServerCert, p.ServerKey = srv.WriteFiles(t, dir, "server")
	p.ClientCert, p.ClientKey = ca.Issue(t, "sluice", true, "sluice.client.test").WriteFiles(t, dir, "client")
	return p
}

// ServerCreds are the server's TLS credentials; they require a client
// certificate signed by the CA.
func (p *PKI) ServerCreds() credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{p.server}, ClientCAs: p.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	})
}
