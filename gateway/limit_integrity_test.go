package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
)

// spelling is one way to write a request: its path and its Host ("" for
// the server's own).
type spelling struct{ path, host string }

// spellingsShareOneAllowance serves a proxy of yaml, whose limit admits one
// request, and sends first (which must be admitted), then each of others,
// which must be refused: another spelling of the same request gets no
// fresh allowance. which names the limit in failures.
func spellingsShareOneAllowance(t *testing.T, yaml string, first spelling, others []spelling, which string) {
	t.Helper()
	_, srv := front(t, parsed(t, yaml, newUpstream(t)))
	c := srv.Client()
	if code := doRaw(t, srv.URL, c, "GET", first.path, first.host).StatusCode; code != 200 {
		t.Fatalf("first: %d", code)
	}
	for _, o := range others {
		if code := doRaw(t, srv.URL, c, "GET", o.path, o.host).StatusCode; code != 429 {
			t.Errorf("path %s, Host %q: %d, want 429 (%s)", o.path, o.host, code, which)
		}
	}
}

// An encoded slash must not take a request out of a subtree's limit: NGINX
// matches locations on the decoded URI, and most upstreams decode %2F too.
func TestEncodedSlashStaysLimited(t *testing.T) {
	var others []spelling
	for _, p := range []string{"/admin%2Fb", "/admin%2fb", "/x/..%2Fadmin%2Fb", "/admin%2Fb/", "/items%2F7"} {
		others = append(others, spelling{path: p})
	}
	spellingsShareOneAllowance(t, `
limits: [{name: admin, key: global, rate: 1r/m, algorithm: fixed_window}]
routes:
  - {name: admin, match: /admin/, limits: [admin]}
  - {name: item, match: "/items/{id}", limits: [admin]}
`, spelling{path: "/admin/a"}, others, "the /admin/ limit")
}

// Host names are case-insensitive and may carry a trailing dot (NGINX
// lowercases $host and drops the dot before matching server_name): neither
// may take a request out of a host route's limit.
func TestHostCaseAndTrailingDotStayLimited(t *testing.T) {
	spellingsShareOneAllowance(t, `
limits: [{name: api, key: global, rate: 1r/m, algorithm: fixed_window}]
routes: [{name: api, match: "GET Api.Example./", limits: [api]}]
`, spelling{"/a", "api.example"},
		[]spelling{{"/a", "API.example"}, {"/a", "api.example."}, {"/a", "Api.Example.:8080"}}, "the api.example limit")
}

// key: host must not give a client a fresh allowance per spelling of the
// same host (case, port, trailing dot), as NGINX's $host does not.
func TestHostKeyNormalizedAcrossSpellings(t *testing.T) {
	spellingsShareOneAllowance(t, `
limits: [{name: h, key: host, rate: 1r/m, algorithm: fixed_window}]
routes: [{name: all, match: /, limits: [h]}]
`, spelling{"/", "a.example"},
		[]spelling{{"/", "A.EXAMPLE"}, {"/", "a.example:81"}, {"/", "a.example."}}, "same host")
}

// An upstream's 1xx (100 Continue for a client's Expect: 100-continue, 103
// Early Hints) must not wipe the RateLimit headers of the final response.
func TestInformationalResponseKeepsRateLimitHeaders(t *testing.T) {
	up := newUpstream(t)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hints" {
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	cfg := parsed(t, `
limits: [{name: per_ip, key: ip, rate: 10r/m, algorithm: fixed_window}]
routes: [{name: all, match: /, limits: [per_ip]}]
`, up)
	_, srv := front(t, cfg)
	for _, tc := range []struct{ name, path, expect string }{
		{"100-continue", "/upload", "100-continue"},
		{"103", "/hints", ""},
	} {
		req, _ := http.NewRequest("POST", srv.URL+tc.path, strings.NewReader(strings.Repeat("x", 2048)))
		if tc.expect != "" {
			req.Header.Set("Expect", tc.expect)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("RateLimit") == "" || resp.Header.Get("RateLimit-Policy") == "" {
			t.Errorf("%s: %d, RateLimit %q, RateLimit-Policy %q: want both", tc.name, resp.StatusCode,
				resp.Header.Get("RateLimit"), resp.Header.Get("RateLimit-Policy"))
		}
	}
}

// Behind a trusted proxy that terminates TLS, the upstream must learn the
// scheme and host the client used, not the hop between proxy and gateway.
func TestTrustedProxyForwardedProtoKept(t *testing.T) {
	up := newUpstream(t)
	_, srv := front(t, gateway.Config{
		Upstreams:      direct(t, up).Upstreams,
		TrustedProxies: trust(t, "127.0.0.0/8"),
	})
	getHeaders(t, srv.Client(), srv.URL+"/",
		"X-Forwarded-For", "198.51.100.7", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "shop.example")
	h := up.headers[0]
	if h.Get("X-Forwarded-Proto") != "https" || h.Get("X-Forwarded-Host") != "shop.example" {
		t.Errorf("X-Forwarded-Proto %q, -Host %q: want the trusted proxy's https, shop.example",
			h.Get("X-Forwarded-Proto"), h.Get("X-Forwarded-Host"))
	}

	// From an untrusted peer both are the gateway's own.
	up2 := newUpstream(t)
	_, srv2 := front(t, direct(t, up2))
	getHeaders(t, srv2.Client(), srv2.URL+"/", "X-Forwarded-Proto", "https", "X-Forwarded-Host", "shop.example")
	h = up2.headers[0]
	if h.Get("X-Forwarded-Proto") != "http" || h.Get("X-Forwarded-Host") == "shop.example" {
		t.Errorf("untrusted: X-Forwarded-Proto %q, -Host %q: a client's own were believed",
			h.Get("X-Forwarded-Proto"), h.Get("X-Forwarded-Host"))
	}
}

// NGINX runs limit_req before limit_conn: a request waiting in a limit_req
// queue holds no limit_conn slot. With limit_conn 1 and a queue of burst 5
// on the same key, a second and a third request that arrive while the first
// has finished both wait their turn; neither gets limit_conn_status.
func TestQueuedRequestHoldsNoConnSlot(t *testing.T) {
	up := newUpstream(t)
	cfg := parsed(t, `
status: 429
conn_status: 503
limits: [{name: q, key: global, rate: 1r/m, burst: 5}]
conns: [{name: c, key: global, max: 1}]
routes: [{name: all, match: /, limits: [q], conns: [c]}]
`, up)
	var queued atomic.Int64
	release := make(chan struct{})
	cfg.Wait = func(ctx context.Context, d time.Duration) error {
		queued.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	_, srv := front(t, cfg)
	c := srv.Client()
	if code := get(t, c, srv.URL+"/").StatusCode; code != 200 {
		t.Fatalf("first: %d", code)
	}
	codes := getLater(t, c, srv.URL+"/")
	for deadline := time.Now().Add(10 * time.Second); queued.Load() != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the second request never queued")
		}
		time.Sleep(time.Millisecond) // polling, not timing
	}
	// The third arrives while the second waits; NGINX queues it too.
	third := getLater(t, c, srv.URL+"/")
	for deadline := time.Now().Add(10 * time.Second); queued.Load() != 2; {
		select {
		case code := <-third:
			close(release)
			<-codes
			t.Fatalf("third, while the second waits in the queue: %d, want to be queued (NGINX's limit_req runs before limit_conn)", code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the third request never queued")
		}
		time.Sleep(time.Millisecond) // polling, not timing
	}
	close(release)
	<-codes
	<-third
}

// getLater sends a GET in the background and delivers its status, or 0
// after failing the test if the request failed.
func getLater(t *testing.T, c *http.Client, u string) <-chan int {
	codes := make(chan int, 1)
	go func() {
		resp, err := c.Get(u)
		if err != nil {
			t.Error(err)
			codes <- 0
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}()
	return codes
}

// A second YAML document in the file is not silently ignored: a config
// split by "---" (limits in the second part) would otherwise run unlimited.
func TestSecondYAMLDocumentRefused(t *testing.T) {
	_, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://u\n---\nlimits: []\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "proxy.yaml:") {
		t.Fatalf("err %v, want an error naming the file", err)
	}
}

// Two routes of one name are refused with the line, as the parser promises
// for everything New checks.
func TestDuplicateRouteNameErrorHasLine(t *testing.T) {
	_, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://u\nroutes:\n  - {name: a, match: /a}\n  - {name: a, match: /b}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "proxy.yaml:4:") {
		t.Fatalf("err %v, want proxy.yaml:4:…", err)
	}
}

// An Upgrade (websocket-style) through a limited route still switches
// protocols and carries bytes both ways: the gateway's wrapping of the
// ResponseWriter keeps Hijack reachable.
func TestUpgradeThroughLimitedRoute(t *testing.T) {
	up := newUpstream(t)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "echo" {
			http.Error(w, "want Upgrade: echo", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		line, err := brw.ReadString('\n')
		if err != nil {
			t.Error(err)
			return
		}
		brw.WriteString("echo " + line)
		brw.Flush()
	})
	cfg := parsed(t, `
limits: [{name: per_ip, key: ip, rate: 10r/m, algorithm: fixed_window}]
conns: [{name: c, key: ip, max: 1}]
routes: [{name: all, match: /, limits: [per_ip], conns: [c]}]
`, up)
	_, srv := front(t, cfg)
	req, _ := http.NewRequest("GET", srv.URL+"/ws", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("RateLimit") == "" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	rw, ok := resp.Body.(io.ReadWriter)
	if !ok {
		t.Fatalf("body %T is not writable", resp.Body)
	}
	io.WriteString(rw, "hi\n")
	buf := make([]byte, len("echo hi\n"))
	if _, err := io.ReadFull(rw, buf); err != nil || string(buf) != "echo hi\n" {
		t.Fatalf("%q %v", buf, err)
	}
}

// A last segment "%2F" is the trailing slash ServeMux reads it as ("/%2F"
// is the root "/{$}" of a Go upstream): the proxy routes and keys it as the
// path without it, so every spelling of "/" or "/login" spends the limit
// of the route that matches that path alone (429 past its 2, not another
// answer), and none gets the upstream's handler past that limit.
func TestSlashSegmentSharesThePathsLimit(t *testing.T) {
	up := newUpstream(t)
	app := http.NewServeMux()
	var root, login atomic.Int64
	app.HandleFunc("/{$}", func(http.ResponseWriter, *http.Request) { root.Add(1) })
	app.HandleFunc("/login/{$}", func(http.ResponseWriter, *http.Request) { login.Add(1) })
	app.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	up.set(app.ServeHTTP)
	cfg := parsed(t, `
limits: [{name: one, key: [ip, route], rate: 2r/m, algorithm: fixed_window}]
routes:
  - {name: root, match: "/{$}", limits: [one]}
  - {name: login, match: "/login", limits: [one]}
  - {name: all, match: /}
`, up)
	_, srv := front(t, cfg)
	c := srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse } // one request, one count
	for _, spellings := range [][]string{
		{"/", "/%2F", "/%2f", "/.//%2F", "/%2F/", "/%2F/%2F"},
		{"/login", "/login/%2F", "/login/%2f/", "/login/%2F/%2F"},
	} {
		for i, target := range spellings {
			code := doRaw(t, srv.URL, c, "GET", target, "").StatusCode
			if refused := code == http.StatusTooManyRequests; refused != (i >= 2) {
				t.Errorf("%s, request %d to its path: %d; want the limit's 2 admitted, then 429", target, i+1, code)
			}
		}
	}
	if n := root.Load(); n > 2 {
		t.Errorf("the upstream's root handler ran %d times, want at most 2 (the limit)", n)
	}
	if n := login.Load(); n > 2 {
		t.Errorf("the upstream's /login/ handler ran %d times, want at most 2 (the limit)", n)
	}
}
