// Package testpki makes the certificate authorities and certificates that
// tests of TLS (gRPC, Redis, xDS, the admin listener) need: one place, so
// that every test's certificates are made the same way.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// validity is how long a certificate is valid from now; each is valid
// from an hour ago too, so that clocks a little apart agree.
const validity = 24 * time.Hour

// CA is a certificate authority made for a test. A zero CA is not usable:
// make one with NewCA.
type CA struct {
	// Cert is the authority's certificate.
	Cert *x509.Certificate
	// PEM is Cert as PEM, for a file or a pool.
	PEM []byte
	key *ecdsa.PrivateKey
}

// NewCA returns a new self-signed authority named name (its common name),
// with a P-256 key; it fails the test on error.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, name)
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: c, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool returns a new pool holding only the authority.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// WriteFile writes the authority's certificate as PEM to dir/name and
// returns the path.
func (ca *CA) WriteFile(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	Write(t, p, ca.PEM)
	return p
}

// Leaf is a certificate an authority issued, as PEM and as the pair a Go
// client or server presents.
type Leaf struct {
	// CertPEM and KeyPEM are the certificate and its key (SEC 1, "EC
	// PRIVATE KEY"), as PEM.
	CertPEM, KeyPEM []byte
	// Pair is the two, loaded.
	Pair tls.Certificate
}

// Issue returns a certificate for common name cn, for a client (extended
// key usage client auth) or else a server (server auth), with the given
// subject alternative names: one with a scheme ("spiffe://...") is a URI,
// an IP address an IP, anything else a DNS name. It fails the test on
// error.
func (ca *CA) Issue(t testing.TB, cn string, client bool, sans ...string) Leaf {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, cn)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, s := range sans {
		if u, err := url.Parse(s); err == nil && u.Scheme != "" {
			tmpl.URIs = append(tmpl.URIs, u)
		} else if ip := net.ParseIP(s); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, s)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}
	if l.Pair, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		t.Fatal(err)
	}
	return l
}

// WriteFiles writes the certificate and key as PEM to dir/name.crt and
// dir/name.key and returns the two paths.
func (l Leaf) WriteFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	Write(t, certFile, l.CertPEM)
	Write(t, keyFile, l.KeyPEM)
	return certFile, keyFile
}

// Write writes b to path (mode 0600), failing the test on error.
func Write(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// template is a certificate for cn with a random serial, valid from an
// hour ago for validity.
func template(t testing.TB, cn string) *x509.Certificate {
	t.Helper()
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	return &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity)}
}
