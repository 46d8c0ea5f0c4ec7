package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
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
	pool, certFile, keyFile, caFile, err := makeCerts(dir)
	if err != nil {
		t.Fatalf("redistest: certificates: %v", err)
	}
	s := &Server{tl: tl, dir: dir, logPath: filepath.Join(dir, "redis.log")}
	tlsPort := 0
	// The TLS port is picked inside the free-port loop, with the main one,
	// so that a TLS port taken before the server binds it is given up too.
	err = s.startOnFreePort(false, func() ([]string, error) {
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

// makeCerts writes a CA and a server certificate for 127.0.0.1 to dir.
func makeCerts(dir string) (pool *x509.CertPool, certFile, keyFile, caFile string, err error) {
	newKey := func() (*ecdsa.PrivateKey, error) { return ecdsa.GenerateKey(elliptic.P256(), rand.Reader) }
	caKey, err := newKey()
	if err != nil {
		return nil, "", "", "", err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, "", "", "", err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, "", "", "", err
	}
	key, err := newKey()
	if err != nil {
		return nil, "", "", "", err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, "", "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, "", "", "", err
	}
	certFile, keyFile, caFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "ca.crt")
	for _, f := range []struct {
		path, kind string
		der        []byte
	}{{certFile, "CERTIFICATE", leafDER}, {keyFile, "EC PRIVATE KEY", keyDER}, {caFile, "CERTIFICATE", caDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.kind, Bytes: f.der}), 0o600); err != nil {
			return nil, "", "", "", err
		}
	}
	pool = x509.NewCertPool()
	pool.AddCert(caCert)
	return pool, certFile, keyFile, caFile, nil
}
