package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/clientip"
)

// The forwarding headers this hop writes cannot be shadowed by a client's
// spelling with "_" for "-" (X_Forwarded_For), which CGI and WSGI servers
// read as the same header (HTTP_X_FORWARDED_FOR): such headers are dropped,
// from any peer, as NGINX drops headers with underscores, so that the
// upstream sees one X-Forwarded-For, the one this hop wrote.
func TestUnderscoreForwardingHeadersDropped(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		up := newUpstream(t)
		cfg := direct(t, up)
		if trusted {
			pfx, _ := clientip.ParsePrefixes("192.0.2.0/24")
			cfg.TrustedProxies = &clientip.Resolver{TrustedProxies: pfx}
		}
		g := newGateway(t, cfg)
		r := httptest.NewRequest("GET", "/x", nil)
		for _, name := range []string{"X_Forwarded_For", "X-Forwarded_Host", "x_forwarded-proto"} {
			r.Header[http.CanonicalHeaderKey(name)] = []string{"203.0.113.66"}
		}
		r.Header["X_custom"] = []string{"kept"}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		for name, v := range up.headers[0] {
			if name == "X_custom" {
				continue
			}
			for _, s := range v {
				if s == "203.0.113.66" {
					t.Errorf("trusted=%v: the upstream got %s: %s", trusted, name, s)
				}
			}
		}
		if up.headers[0].Get("X_custom") != "kept" {
			t.Errorf("trusted=%v: a header with _ that no hop writes was dropped", trusted)
		}
	}
}
