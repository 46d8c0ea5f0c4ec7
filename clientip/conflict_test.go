package clientip_test

import (
	"testing"

	"github.com/sluicehq/sluice/clientip"
)

// Behind a trusted proxy that maintains only Forwarded, a Resolver left at
// X-Forwarded-For (the default) would read an X-Forwarded-For the client
// wrote itself, and the client would choose its per-IP key: a trusted
// peer's request whose two headers name different clients is answered with
// the peer, an allowance the client cannot choose. Headers that agree, or
// only one header, are read as before; a Resolver reading Forwarded never
// reads X-Forwarded-For at all.
func TestConflictingForwardingHeadersGiveThePeer(t *testing.T) {
	trusted := mustPrefixes(t, "10.0.0.0/8")
	for _, tc := range []struct {
		name     string
		header   clientip.Header
		xff, fwd string // "" for none
		want     string
	}{
		{"forged xff, proxy's forwarded", clientip.XForwardedFor, "198.51.100.66", "for=203.0.113.7", "10.0.0.1"},
		{"forged xff chain, proxy's forwarded", clientip.XForwardedFor, "198.51.100.66, 198.51.100.67", `for=198.51.100.66, for="203.0.113.7"`, "10.0.0.1"},
		{"agreeing", clientip.XForwardedFor, "203.0.113.7", "for=203.0.113.7", "203.0.113.7"},
		{"xff only", clientip.XForwardedFor, "203.0.113.7", "", "203.0.113.7"},
		{"forwarded only, xff resolver", clientip.XForwardedFor, "", "for=203.0.113.7", "10.0.0.1"},
		{"forwarded resolver ignores xff", clientip.Forwarded, "198.51.100.66", "for=203.0.113.7", "203.0.113.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := request("10.0.0.1:4711", "X-Forwarded-For")
			if tc.xff != "" {
				req.Header.Add("X-Forwarded-For", tc.xff)
			}
			if tc.fwd != "" {
				req.Header.Add("Forwarded", tc.fwd)
			}
			r := &clientip.Resolver{TrustedProxies: trusted, Header: tc.header}
			got, err := r.ClientIP(req)
			if err != nil || got.String() != tc.want {
				t.Errorf("ClientIP = %v, %v; want %s", got, err, tc.want)
			}
		})
	}
	// From an untrusted peer, neither header is read.
	req := request("192.0.2.1:4711", "X-Forwarded-For", "198.51.100.66")
	req.Header.Add("Forwarded", "for=203.0.113.7")
	if got := clientIP(t, &clientip.Resolver{TrustedProxies: trusted}, req); got != "192.0.2.1" {
		t.Errorf("untrusted peer: %v", got)
	}
}
