package main

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/daemontest"
	"github.com/sluicehq/sluice/internal/testpki"
)

// testCA is a certificate authority made for one test: internal/testpki's,
// under the names this package's tests use.
type testCA struct {
	ca   *testpki.CA
	cert *x509.Certificate
	pem  []byte
}

// newTestCA returns a new self-signed CA named name.
func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca := testpki.NewCA(t, name)
	return &testCA{ca: ca, cert: ca.Cert, pem: ca.PEM}
}

// leaf is a certificate issued by a testCA, as PEM, and as the pair a
// Go client or server uses.
type leaf struct {
	certPEM, keyPEM []byte
	pair            tls.Certificate
}

// issue returns a certificate for cn with the given SANs ("spiffe://..."
// as a URI, an IP, else a DNS name), for a server or a client.
func (ca *testCA) issue(t *testing.T, cn string, client bool, sans ...string) leaf {
	t.Helper()
	l := ca.ca.Issue(t, cn, client, sans...)
	return leaf{certPEM: l.CertPEM, keyPEM: l.KeyPEM, pair: l.Pair}
}

// tlsFiles writes a server pair and a client CA into dir and returns the
// options that name them.
func tlsFiles(t *testing.T, dir string, server leaf, clientCA *testCA) daemon.GRPCTLSOptions {
	t.Helper()
	o := daemon.GRPCTLSOptions{Use: true, Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	writeAtomic(t, o.Cert, string(server.certPEM))
	writeAtomic(t, o.Key, string(server.keyPEM))
	if clientCA != nil {
		o.ClientCA = filepath.Join(dir, "ca.crt")
		writeAtomic(t, o.ClientCA, string(clientCA.pem))
	}
	return o
}

// The helpers these tests share with those of internal/daemon.
var (
	dial         = daemontest.Dial
	checkHealth  = daemontest.CheckHealth
	eventually   = daemontest.Eventually
	writeFile    = daemontest.WriteFile
	writeAtomic  = daemontest.WriteAtomic
	shortTempDir = daemontest.ShortTempDir
	quietLogger  = daemontest.QuietLogger
)
