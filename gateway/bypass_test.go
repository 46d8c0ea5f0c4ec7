package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// upstreamHeaders sends a GET of /x with header from 192.0.2.1 through a
// gateway that trusts 192.0.2.0/24 when trusted (else no peer), and
// returns the header the upstream received; a status other than 200 fails
// the test.
func upstreamHeaders(t *testing.T, trusted bool, header http.Header) http.Header {
	t.Helper()
	up := newUpstream(t)
	cfg := direct(t, up)
	cfg.TrustedProxies = trustIf(t, trusted, "192.0.2.0/24")
	g := newGateway(t, cfg)
	r := httptest.NewRequest("GET", "/x", nil) // from 192.0.2.1
	r.Header = header.Clone()
	w := httptest.NewRecorder()
	if g.ServeHTTP(w, r); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	return up.headers[0]
}

// The forwarding headers this hop writes cannot be shadowed by a client's
// spelling with "_" for "-" (X_Forwarded_For), which CGI and WSGI servers
// read as the same header (HTTP_X_FORWARDED_FOR): such headers are dropped,
// from any peer, as NGINX drops headers with underscores, so that the
// upstream sees one X-Forwarded-For, the one this hop wrote.
func TestUnderscoreForwardingHeadersDropped(t *testing.T) {
	sent := http.Header{"X_custom": {"kept"}}
	for _, name := range []string{"X_Forwarded_For", "X-Forwarded_Host", "x_forwarded-proto", "X_Real_Ip"} {
		sent[http.CanonicalHeaderKey(name)] = []string{"203.0.113.66"}
	}
	for _, trusted := range []bool{false, true} {
		got := upstreamHeaders(t, trusted, sent)
		for name, v := range got {
			if name == "X_custom" {
				continue
			}
			for _, s := range v {
				if s == "203.0.113.66" {
					t.Errorf("trusted=%v: the upstream got %s: %s", trusted, name, s)
				}
			}
		}
		if got.Get("X_custom") != "kept" {
			t.Errorf("trusted=%v: a header with _ that no hop writes was dropped", trusted)
		}
	}
}

// An encoded slash has two readings: NGINX and applications that decode
// the whole path see a slash, ServeMux sees a character of its segment.
// When the two readings match different routes, the request is limited by
// both, so that neither kind of upstream reaches a limited handler past
// its limit: "/users/a%2Fb/reset" is ServeMux's {id} "a/b" of the reset
// route, though read as a slash it is only under "/"; and
// "/users/x%2F..%2F..%2Fadmin%2Fx" is the decoding upstream's /admin/x,
// though ServeMux sees one {id} of /users/{id}.
func TestEncodedSlashLimitedByBothReadings(t *testing.T) {
	up := newUpstream(t)
	app := http.NewServeMux() // what a Go upstream routes to
	var mu sync.Mutex
	hits := map[string]int{}
	for _, p := range []string{"POST /users/{id}/reset", "/users/{id}", "/admin/", "/"} {
		app.HandleFunc(p, func(http.ResponseWriter, *http.Request) {
			mu.Lock()
			hits[p]++
			mu.Unlock()
		})
	}
	up.set(app.ServeHTTP)
	cfg := parsed(t, `
limits:
  - {name: reset, key: ip, rate: 1r/m, algorithm: fixed_window}
  - {name: admin, key: ip, rate: 1r/m, algorithm: fixed_window}
  - {name: users, key: ip, rate: 100r/m, algorithm: fixed_window}
  - {name: all, key: ip, rate: 100r/m, algorithm: fixed_window}
routes:
  - {name: reset, match: "POST /users/{id}/reset", limits: [reset]}
  - {name: users, match: "/users/{id}", limits: [users]}
  - {name: admin, match: "/admin/", limits: [admin]}
  - {name: all, match: "/", limits: [all]}
`, up)
	_, srv := front(t, cfg)
	c := srv.Client()
	for i, target := range []string{"/users/bob/reset", "/users/a%2Fb/reset", "/users/x%2F..%2F/reset", "/users/b%2Fo%2F/reset"} {
		code := doRaw(t, srv.URL, c, "POST", target, "").StatusCode
		if want := map[bool]int{true: 200, false: 429}[i == 0]; code != want {
			t.Errorf("POST %s: %d, want %d", target, code, want)
		}
	}
	for i, target := range []string{"/admin/x", "/users/x%2F..%2F..%2Fadmin%2Fx", "/admin%2Fx"} {
		code := doRaw(t, srv.URL, c, "GET", target, "").StatusCode
		if want := map[bool]int{true: 200, false: 429}[i == 0]; code != want {
			t.Errorf("GET %s: %d, want %d", target, code, want)
		}
	}
	// Unambiguous: the encoded slash inside {id} is one user, and both
	// readings agree that /users/a%2Fb is under users or nothing else.
	if code := doRaw(t, srv.URL, c, "GET", "/users/a%2Fb", "").StatusCode; code != 200 {
		t.Errorf("GET /users/a%%2Fb: %d, want 200", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := hits["POST /users/{id}/reset"]; n != 1 {
		t.Errorf("the upstream's reset handler ran %d times, want 1 (the limit)", n)
	}
}

// An HTTP/1.1 "Upgrade: h2c" is never passed on: an upstream that took it
// would answer 101 and speak HTTP/2 through the tunnel the proxy keeps for
// an upgrade, and every request the client then sends on it would reach
// the upstream unrouted and unlimited. The request goes on as a plain one.
// (A WebSocket upgrade is passed on as before.)
func TestH2CUpgradeNotForwarded(t *testing.T) {
	up := newUpstream(t)
	_, srv := front(t, direct(t, up))
	for _, upgrade := range []string{"h2c", "H2C", "websocket, h2c"} {
		resp := getHeaders(t, srv.Client(), srv.URL+"/x",
			"Connection", "Upgrade", "Upgrade", upgrade, "HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Upgrade: %s: %d, want 200 (a plain request)", upgrade, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("GET", srv.URL+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	if resp, err := srv.Client().Do(req); err == nil {
		resp.Body.Close()
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for i, h := range up.headers[:3] {
		if h.Get("Upgrade") != "" || h.Get("Http2-Settings") != "" {
			t.Errorf("request %d: the upstream got Upgrade %q, HTTP2-Settings %q", i, h.Get("Upgrade"), h.Get("Http2-Settings"))
		}
	}
	if h := up.headers[3]; h.Get("Upgrade") != "websocket" {
		t.Errorf("a WebSocket upgrade reached the upstream with Upgrade %q", h.Get("Upgrade"))
	}
}

// An upstream with a base path gets the request's path under it, never
// beside it: the path goes on in canonical form (no ".", ".." or "//"
// left for the upstream to resolve above the base), and a path whose
// encoded slashes would climb out of the base once decoded is 400.
// (Without a base path the upstream gets the path as sent.)
func TestBasePathNotEscaped(t *testing.T) {
	up := newUpstream(t)
	var mu sync.Mutex
	var seen []string
	up.set(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.RequestURI)
		mu.Unlock()
	})
	cfg := direct(t, up)
	cfg.Upstreams[0].URL = mustURL(t, up.URL+"/base")
	_, srv := front(t, cfg)
	for _, target := range []string{"/x", "/../secret", "/a/../../secret", "/%2e%2e/secret", "/.%2E/secret", "//secret", "/x/..%2F..%2Fsecret", "/x%2F..%2F..%2Fsecret"} {
		resp := doRaw(t, srv.URL, srv.Client(), "GET", target, "")
		if resp.StatusCode != 200 && resp.StatusCode != 400 {
			t.Errorf("%s: %d", target, resp.StatusCode)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, uri := range seen {
		p, err := url.PathUnescape(uri)
		if err != nil {
			t.Errorf("the upstream got %s, not a path: %v", uri, err)
			continue
		}
		if c := path.Clean(p); c != "/base" && !strings.HasPrefix(c, "/base/") {
			t.Errorf("the upstream got %s, which resolves to %s, outside /base", uri, c)
		}
	}
	if len(seen) < 5 {
		t.Errorf("the upstream got %d requests: %q; want at least the 5 without encoded slashes", len(seen), seen)
	}
}

// A header key that no request can carry is refused with its line, not
// loaded as a limit that never applies: Go's server keeps Host and
// Transfer-Encoding out of the header map (key: host is the host's
// canonical form), and a name that is not a token is never a header.
// With missing_key: skip such a limit let everything through.
func TestHeaderKeyNoRequestCarriesRefused(t *testing.T) {
	for _, name := range []string{"Host", "host", "Transfer-Encoding", "X API", "X-Key:"} {
		_, err := gateway.ParseFile("proxy.yaml", []byte(`upstream: http://127.0.0.1:1
limits: [{name: l, key: "header:`+name+`", rate: 1r/s, algorithm: fixed_window, missing_key: skip}]
routes: [{name: all, match: /, limits: [l]}]
`))
		if err == nil || !strings.Contains(err.Error(), "proxy.yaml:2:") {
			t.Errorf("header:%s: %v, want an error at line 2", name, err)
		}
	}
}

// A client's X-Real-IP (what NGINX set with proxy_set_header X-Real-IP
// $remote_addr, and what applications behind it read) reaches the upstream
// only from a trusted proxy, as X-Forwarded-For does: from anyone else it
// is dropped, so that no client names its own address to an application
// that moved from behind NGINX.
func TestUntrustedXRealIPDropped(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		got := upstreamHeaders(t, trusted, http.Header{"X-Real-Ip": {"203.0.113.66"}}).Get("X-Real-IP")
		if want := map[bool]string{false: "", true: "203.0.113.66"}[trusted]; got != want {
			t.Errorf("trusted=%v: X-Real-IP %q, want %q", trusted, got, want)
		}
	}
}
