package rlqs

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"net"
	"strconv"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

// peerName returns what a stream's client cannot simply claim about
// itself: its verified client certificate's identity ("x509:" and its first
// URI SAN, else its first DNS SAN, else its first email SAN, else its
// subject's common name, else its fingerprint) when the connection is mTLS,
// else its TCP peer's IP address ("ip:" and the address), else "" (a Unix
// socket, a test's pipe: no peer to tell apart).
func peerName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 && len(ti.State.PeerCertificates) > 0 {
		return "x509:" + certName(ti.State.PeerCertificates[0])
	}
	if a, ok := p.Addr.(*net.TCPAddr); ok {
		if ip, ok := netipFrom(a); ok {
			return "ip:" + ip
		}
	}
	return ""
}

// netipFrom returns a TCP address's IP as text, an IPv4-mapped address as
// IPv4.
func netipFrom(a *net.TCPAddr) (string, bool) {
	ap := a.AddrPort()
	if !ap.Addr().IsValid() {
		return "", false
	}
	return ap.Addr().Unmap().String(), true
}

// certName names a certificate by its identity (see peerName).
func certName(c *x509.Certificate) string {
	switch {
	case len(c.URIs) > 0:
		return c.URIs[0].String()
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	case len(c.EmailAddresses) > 0:
		return c.EmailAddresses[0]
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	}
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:16])
}

// withPeer returns the store's name of a client of peer p: "p", the
// length of p, ":", p, "|" and rest; rest alone without a peer.
func withPeer(p, rest string) string {
	if p == "" {
		return rest
	}
	return "p" + strconv.Itoa(len(p)) + ":" + p + "|" + rest
}

// peerOf returns the peer in a client's store name (see withPeer); false
// for a name without one (no peer, or written by an older replica), which
// counts as a peer of its own.
func peerOf(client string) (string, bool) {
	if !strings.HasPrefix(client, "p") {
		return "", false
	}
	n, rest, ok := strings.Cut(client[1:], ":")
	if !ok {
		return "", false
	}
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 || l > len(rest) {
		return "", false
	}
	return rest[:l], true
}
