package clientip_test

import (
	"testing"

	"github.com/sluicehq/sluice/clientip"
)

// TrustsPeer is the decision ClientIP makes: a peer it trusts is one whose
// X-Forwarded-For ClientIP reads, zoned, mapped or not, and the other way
// round.
func TestTrustsPeerIsClientIPsDecision(t *testing.T) {
	r := &clientip.Resolver{TrustedProxies: mustPrefixes(t, "fe80::/10", "10.0.0.0/8")}
	for _, tc := range []struct {
		peer string
		want bool
	}{
		{"[fe80::1%eth0]:4711", true},
		{"[fe80::1]:4711", true},
		{"fe80::1%eth0", true},
		{"10.0.0.2:80", true},
		{"[::ffff:10.0.0.2]:80", true},
		{"192.0.2.1:80", false},
		{"[2001:db8::1%eth0]:80", false},
		{"not an address", false},
	} {
		req := request(tc.peer, "X-Forwarded-For", "203.0.113.7")
		if got := r.TrustsPeer(req); got != tc.want {
			t.Errorf("TrustsPeer(%s) = %v, want %v", tc.peer, got, tc.want)
		}
		ip, err := r.ClientIP(req)
		if believed := err == nil && ip.String() == "203.0.113.7"; believed != tc.want {
			t.Errorf("peer %s: ClientIP = %v, %v; TrustsPeer says %v", tc.peer, ip, err, tc.want)
		}
	}
	var zero *clientip.Resolver
	if zero.TrustsPeer(request("10.0.0.2:80", "")) || (&clientip.Resolver{}).TrustsPeer(request("10.0.0.2:80", "")) {
		t.Error("a nil or zero Resolver trusts a peer")
	}
	if a, err := clientip.Peer(request("[fe80::1%eth0]:4711", "")); err != nil || a.String() != "fe80::1" {
		t.Errorf("Peer = %v, %v; want fe80::1 without its zone", a, err)
	}
}
