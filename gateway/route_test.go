package gateway_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/clocktest"
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

// A reload that keeps every route's patterns but changes the rest (the
// route's name, methods, upstream and limits) serves the new routes, from
// the first request after Update, while requests are in flight; a reload
// that fails in New's checks after the file parsed keeps the running
// routes.
func TestReloadWithTheSamePatternsServesTheNewRoutes(t *testing.T) {
	one, two := newUpstream(t), newUpstream(t)
	file := func(routes string) gateway.Config {
		f, err := gateway.ParseFile("proxy.yaml", []byte(`
upstreams: [{name: one, url: "`+one.URL+`"}, {name: two, url: "`+two.URL+`"}]
limits: [{name: l, key: global, rate: 1r/h, algorithm: token_bucket}]
routes:
`+routes))
		if err != nil {
			t.Fatal(err)
		}
		f.Config.Limiter = store(t, clocktest.New())
		return f.Config
	}
	g, srv := front(t, file(`
  - {name: a, match: /a/, methods: [GET], upstream: one}
  - {name: b, match: [/b/, "GET api.example.com/"], upstream: one}
`))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { // requests in flight across the reloads, for -race
		for {
			select {
			case <-stop:
				return
			default:
				if resp, err := srv.Client().Get(srv.URL + "/b/x"); err == nil {
					resp.Body.Close()
				}
			}
		}
	})
	next := file(`
  - {name: a2, match: /a/, methods: [POST], upstream: two, limits: [l]}
  - {name: b, match: [/b/, "GET api.example.com/"], upstream: two}
`)
	if err := g.Update(next); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	before, twoBefore := one.hits.Load(), two.hits.Load() // the requests in flight went to either
	post := func() int {
		req, _ := http.NewRequest("POST", srv.URL+"/a/x", nil)
		return send(t, srv.Client(), req).StatusCode
	}
	if got := get(t, srv.Client(), srv.URL+"/a/x").StatusCode; got != http.StatusForbidden {
		t.Errorf("GET /a/x after the reload: %d, want 403 (route a2 takes POST only)", got)
	}
	if a, b := post(), post(); a != 200 || b != 429 {
		t.Errorf("POST /a/x twice after the reload: %d, %d; want 200, 429 (a2's limit)", a, b)
	}
	if got := get(t, srv.Client(), srv.URL+"/b/x").StatusCode; got != 200 || one.hits.Load() != before || two.hits.Load()-twoBefore != 2 {
		t.Errorf("after the reload: /b/x %d, upstream one %d more hits, two %d; want 200, 0, 2 (every route on two)", got, one.hits.Load()-before, two.hits.Load()-twoBefore)
	}
	bad := file(`
  - {name: a3, match: /a/, upstream: one}
  - {name: b, match: [/b/, "GET api.example.com/"], upstream: one}
`)
	bad.Routes[1].Upstream = "gone" // New finds it, after route a3
	if err := g.Update(bad); err == nil {
		t.Fatal("Update with an unknown upstream: no error")
	}
	if got := get(t, srv.Client(), srv.URL+"/a/x").StatusCode; got != http.StatusForbidden || one.hits.Load() != before {
		t.Errorf("GET /a/x after a failed reload: %d, upstream one %d more hits; want 403, 0 (a2 still runs)", got, one.hits.Load()-before)
	}
}
