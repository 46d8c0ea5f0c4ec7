package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/gateway"
)

// Patterns are matched by requests' canonical form: a pattern's method is
// upper-cased and its host made canonical; a host with a port, or a path
// segment no canonical path has, is an error rather than a route that
// never matches.
func TestPatternsInCanonicalForm(t *testing.T) {
	up := newUpstream(t)
	for _, bad := range []string{"api.example.com:8080/x", "[::1]:80/x", "api..example.com/", "/a//b", "/a/./b", "/a/%2e%2E/b", "/a/%2F", "/a/%2f", "/a/%2F/{$}", "PO(ST /x"} {
		cfg := direct(t, up)
		cfg.Routes = []gateway.Route{{Name: "r", Patterns: []string{bad}}}
		if _, err := gateway.New(cfg); err == nil {
			t.Errorf("pattern %q: no error", bad)
		}
	}
	cfg := parsed(t, `
limits: [{name: l, key: global, rate: 1r/h, algorithm: token_bucket}]
routes:
  - {name: login, match: "post API.Example.com./login", limits: [l]}
`, up)
	_, srv := front(t, cfg)
	if code := doRaw(t, srv.URL, srv.Client(), "POST", "/login", "api.example.com").StatusCode; code != 200 {
		t.Fatalf("first: %d", code)
	}
	if code := doRaw(t, srv.URL, srv.Client(), "Post", "/login/", "API.EXAMPLE.COM.:80").StatusCode; code != 429 {
		t.Errorf("the same request spelled otherwise: %d, want 429", code)
	}
}

// A zoned IPv6 peer inside the trusted fe80::/10 is trusted by the
// forwarding as by the ip key: its X-Forwarded-For chain and Forwarded
// elements reach the upstream, and this hop's Forwarded element names the
// peer without its zone, which RFC 7239 has no room for.
func TestZonedPeerTrustedForForwarding(t *testing.T) {
	up := newUpstream(t)
	cfg := direct(t, up)
	cfg.TrustedProxies = trust(t, "fe80::/10", clientip.Forwarded)
	g := newGateway(t, cfg)
	r := httptest.NewRequest("GET", "/x", nil)
	r.RemoteAddr = "[fe80::1%eth0]:4711"
	r.Header.Set("X-Forwarded-For", "203.0.113.7")
	r.Header.Set("Forwarded", "for=203.0.113.7")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	h := up.headers[0]
	if got := h.Get("X-Forwarded-For"); !strings.HasPrefix(got, "203.0.113.7, fe80::1") {
		t.Errorf("X-Forwarded-For %q, want the chain then the peer", got)
	}
	if got := strings.Join(h.Values("Forwarded"), ", "); !strings.HasPrefix(got, `for=203.0.113.7, for="[fe80::1]";`) {
		t.Errorf("Forwarded %q, want the chain then this hop without the zone", got)
	}
}

// A Config from ParseFile whose routes are changed before New is routed
// by the routes it has then, not by the patterns the file had: the
// patterns ParseFile registered serve only while they still fit.
func TestRoutesChangedAfterParseAreRoutedAsTheyAre(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, `
limits: [{name: l, key: global, rate: 1r/h, algorithm: token_bucket}]
routes:
  - {name: a, match: /a/, limits: [l]}
  - {name: b, match: /b/}
`, up)
	cfg.Routes[0].Patterns = []string{"/c/"}
	_, srv := front(t, cfg)
	for _, c := range []struct {
		path string
		want int
	}{{"/c/x", 200}, {"/c/x", 429}, {"/a/x", 200}, {"/a/x", 200}, {"/b/x", 200}} {
		if got := get(t, srv.Client(), srv.URL+c.path).StatusCode; got != c.want {
			t.Errorf("GET %s: %d, want %d (route a is /c/ now, /a/ no route)", c.path, got, c.want)
		}
	}
}
