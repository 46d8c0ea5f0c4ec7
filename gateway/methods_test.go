package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/testlog"
)

// NGINX's location = /login { limit_except POST { deny all; } limit_req …; }:
// a route with methods answers 403 to any other method, which neither
// reaches the upstream nor spends the limit; GET allows HEAD.
func TestRouteMethodsDenyOthers(t *testing.T) {
	up := newUpstream(t)
	var log testlog.Buffer
	cfg := parsed(t, `
limits: [{name: login, key: ip, rate: 2r/h, algorithm: fixed_window}]
routes:
  - {name: login, match: /login, methods: [POST], limits: [login]}
  - {name: page, match: /page, methods: [GET]}
`, up)
	cfg.AccessLog = &log
	_, srv := front(t, cfg)
	c := srv.Client()
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/login", 403}, {"PUT", "/login", 403}, {"HEAD", "/login", 403},
		{"POST", "/login", 200}, {"POST", "/login", 200}, {"POST", "/login", 429}, {"GET", "/login", 403},
		{"GET", "/page", 200}, {"HEAD", "/page", 200}, {"DELETE", "/page", 403},
	} {
		if got := doRaw(t, srv.URL, c, tc.method, tc.path, "").StatusCode; got != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, got, tc.want)
		}
	}
	if n := up.hits.Load(); n != 4 {
		t.Errorf("the upstream saw %d requests, want 4 (two POSTs, GET and HEAD /page)", n)
	}
	if !strings.Contains(log.String(), `"GET /login HTTP/1.1" 403 `) || !strings.Contains(log.String(), `outcome=DENIED by="login"`) {
		t.Errorf("access log %q", log.String())
	}
}

// NGINX's one zone with a burst per location: two routes share a limit's
// state (its key and rate) and each has its own burst.
func TestRouteBurstOnSharedLimit(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, `
limits: [{name: one, key: global, rate: 1r/m}]
routes:
  - {name: api, match: /api/, limits: [{name: one, burst: 4, nodelay: true}]}
  - {name: login, match: /login, limits: [{name: one, burst: 1, nodelay: true}]}
`, up)
	_, srv := front(t, cfg)
	c := srv.Client()
	// The clock stands still: login admits its first and one more (burst
	// 1); api, sharing the excess, admits up to burst 4, so three more.
	want := []struct {
		path string
		code int
	}{{"/login", 200}, {"/login", 200}, {"/login", 429}, {"/api/x", 200}, {"/api/x", 200}, {"/api/x", 200}, {"/api/x", 429}, {"/login", 429}}
	for i, w := range want {
		if got := get(t, c, srv.URL+w.path).StatusCode; got != w.code {
			t.Errorf("request %d %s: %d, want %d", i+1, w.path, got, w.code)
		}
	}
}

// The file's errors for methods and per-route limits name the line.
func TestRouteMethodsAndBurstErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"routes: [{name: r, match: /x, methods: [post]}]", `proxy.yaml:2:`},
		{"routes: [{name: r, match: /x, methods: []}]", `methods is empty`},
		{"routes: [{name: r, match: \"GET /x\", methods: [POST]}]", `use one`},
		{"limits: [{name: a, key: ip, rate: 1r/s, algorithm: token_bucket}]\nroutes: [{name: r, match: /x, limits: [{name: a, burst: 3}]}]", `proxy.yaml:3:`},
		{"limits: [{name: a, key: ip, rate: 1r/s}]\nroutes: [{name: r, match: /x, limits: [{name: a, burst: 0}]}]", `burst 0`},
		{"limits: [{name: a, key: ip, rate: 1r/s}]\nroutes: [{name: r, match: /x, limits: [{name: a, rate: 3r/s}]}]", `unknown key "rate"`},
		{"limits: [{name: a, key: ip, rate: 1r/s}]\nroutes: [{name: r, match: /x, limits: [a, a]}]", `named twice`},
		{"limits: [{name: a, key: ip, rate: 1r/s, burst: 5}]\nroutes: [{name: r, match: /x, limits: [{name: a, delay: 9}]}]", `delay 9 is above burst 5`},
		{"client_body_timeout: 0s", `proxy.yaml:2:`},
		{"send_timeout: fast", `send_timeout "fast"`},
	} {
		_, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\n"+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// The timeouts the file sets reach the Config; those it leaves out are
// NGINX's defaults.
func TestFileTimeouts(t *testing.T) {
	f, err := gateway.ParseFile("proxy.yaml", []byte("client_body_timeout: 5s\nkeepalive_timeout: 2m\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := f.Config.Timeouts.WithDefaults()
	want := gateway.Timeouts{ClientHeader: gateway.DefaultClientHeaderTimeout, ClientBody: 5e9, ClientBodyMinRate: gateway.DefaultClientBodyMinRate, Send: gateway.DefaultSendTimeout, Keepalive: 120e9}
	if got != want {
		t.Fatalf("timeouts %+v, want %+v", got, want)
	}
	if s := f.Config.Timeouts.Server(http.NotFoundHandler(), nil); s.ReadHeaderTimeout != 60e9 || s.IdleTimeout != 120e9 || s.ReadTimeout != 0 || s.WriteTimeout != 0 {
		t.Fatalf("server timeouts %v %v %v %v", s.ReadHeaderTimeout, s.IdleTimeout, s.ReadTimeout, s.WriteTimeout)
	}
}
