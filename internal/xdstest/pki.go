package xdstest

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
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"
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

// NewPKI makes the certificates; they are valid for an hour.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{
		CAFile: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	caKey := newKey(t)
	caTmpl := template(1, "xdstest CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(ca)
	writePEM(t, p.CAFile, "CERTIFICATE", caDER)

	srv := template(2, ServerName)
	srv.DNSNames, srv.IPAddresses = []string{ServerName}, []net.IP{net.IPv4(127, 0, 0, 1)}
	srv.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	p.server = issue(t, srv, ca, caKey, p.ServerCert, p.ServerKey)
	cli := template(3, "sluice")
	cli.DNSNames = []string{"sluice.client.test"}
	cli.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	issue(t, cli, ca, caKey, p.ClientCert, p.ClientKey)
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

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func template(serial int64, cn string) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
}

// issue signs tmpl with the CA, writes the certificate and its key, and
// returns the pair.
func issue(t testing.TB, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certFile, keyFile string) tls.Certificate {
	t.Helper()
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "PRIVATE KEY", keyDER)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
