package testpki

import (
	"crypto/x509"
	"testing"
)

// A server leaf verifies for its names against the authority's pool, and
// not against another authority's; a client leaf verifies as a client.
func TestIssuedLeavesVerifyAgainstTheirAuthority(t *testing.T) {
	ca, other := NewCA(t, "ca"), NewCA(t, "other")
	srv := ca.Issue(t, "server", false, "127.0.0.1", "a.test", "spiffe://test/s")
	cert := srv.Pair.Leaf
	if cert == nil {
		var err error
		if cert, err = x509.ParseCertificate(srv.Pair.Certificate[0]); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"127.0.0.1", "a.test"} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: name}); err != nil {
			t.Errorf("server leaf for %s: %v", name, err)
		}
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != "spiffe://test/s" {
		t.Errorf("URIs %v, want spiffe://test/s", cert.URIs)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: other.Pool(), DNSName: "a.test"}); err == nil {
		t.Error("server leaf verified against another authority")
	}
	cli := ca.Issue(t, "client", true)
	c, err := x509.ParseCertificate(cli.Pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client leaf: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool()}); err == nil {
		t.Error("client leaf verified as a server")
	}
}
