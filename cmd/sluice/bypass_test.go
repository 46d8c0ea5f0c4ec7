package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A spelling is one way to write the request a limit is about.
type spelling struct{ method, target, host string }

// The spellings of POST /login that an application could take for it:
// Werkzeug and Flask upper-case the method, many frameworks decode,
// merge slashes, resolve dot segments and ignore a trailing slash.
var loginSpellings = []spelling{
	{"post", "/login", ""},
	{"pOsT", "/login", ""},
	{"POST", "/%6Cogin", ""},
	{"POST", "//login", ""},
	{"POST", "/./login", ""},
	{"POST", "/login/", ""},
	{"POST", "/foo/../login", ""},
	{"POST", "/foo/%2e%2e/login", ""},
	{"POST", "/login%2F", ""},
	{"POST", "/foo%2F..%2Flogin", ""},
}

// send sends method target to base with Host host ("" leaves it), and
// returns the status and body.
func send(t *testing.T, client *http.Client, base string, s spelling, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(s.method, base+s.target, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.host != "" {
		req.Host = s.host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusBadRequest && resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%v: 400 with Content-Type %q, want a problem", s, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, string(b)
}

// countingUpstream counts what reaches it, by the first segment of the
// path as sent ("login" for every spelling above, "h" for the host test).
type countingUpstream struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	xff  []string
}

func newCountingUpstream(t *testing.T) *countingUpstream {
	u := &countingUpstream{hits: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := "login"
		if strings.HasPrefix(r.URL.Path, "/h") {
			k = "h"
		}
		u.mu.Lock()
		u.hits[k]++
		u.xff = append(u.xff, r.Header.Get("X-Forwarded-For"))
		u.mu.Unlock()
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *countingUpstream) count(k string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.hits[k]
}

const bypassProxyCfg = `
limits:
  - {name: login, key: ip, rate: 2r/h, algorithm: token_bucket}
  - {name: api, key: ip, rate: 2r/h, algorithm: token_bucket}
routes:
  - {name: login, match: "POST /login", limits: [login]}
  - {name: api, match: "api.example.com/", limits: [api]}
`

// Through sluice proxy, no spelling of POST /login or of the host
// api.example.com gets past a limit of 2: the upstream sees 2 of each,
// whatever the method's case, the path's escapes, slashes and dot
// segments, or the host's case, port and dots; a host with two trailing
// dots is malformed (400, as NGINX answers).
func TestProxyNoSpellingBypassesALimit(t *testing.T) {
	up := newCountingUpstream(t)
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	writeAtomic(t, cfg, bypassProxyCfg)
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL)
	client := &http.Client{}

	for i := range 2 {
		if code, body := send(t, client, p.url, spelling{"POST", "/login", ""}, nil); code != 200 {
			t.Fatalf("POST /login %d: %d %s", i+1, code, body)
		}
	}
	for _, s := range loginSpellings {
		if code, _ := send(t, client, p.url, s, nil); code != http.StatusTooManyRequests {
			t.Errorf("%s %s after the limit: %d, want 429", s.method, s.target, code)
		}
	}
	if n := up.count("login"); n != 2 {
		t.Errorf("the upstream saw %d logins, want 2 (the limit)", n)
	}

	for i := range 2 {
		if code, body := send(t, client, p.url, spelling{"GET", "/h", "api.example.com"}, nil); code != 200 {
			t.Fatalf("host %d: %d %s", i+1, code, body)
		}
	}
	for _, h := range []string{"API.EXAMPLE.COM", "api.example.com.", "api.example.com:80", "Api.Example.Com.:8080"} {
		if code, _ := send(t, client, p.url, spelling{"GET", "/h", h}, nil); code != http.StatusTooManyRequests {
			t.Errorf("Host %s after the limit: %d, want 429", h, code)
		}
	}
	for _, h := range []string{"api.example.com..", "api..example.com", "api.example.com:x"} {
		if code, _ := send(t, client, p.url, spelling{"GET", "/h", h}, nil); code != http.StatusBadRequest {
			t.Errorf("Host %s: %d, want 400", h, code)
		}
	}
	if n := up.count("h"); n != 2 {
		t.Errorf("the upstream saw %d requests for api.example.com, want 2 (the limit)", n)
	}
}

const bypassAuthRules = `domain: edge
descriptors:
  - key: method
    value: POST
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket, name: login}
forward_auth:
  descriptors:
    - entries: [{key: method, from: method}, {key: path, from: path}]
`

// Through sluice serve's /auth, as Traefik asks it: no spelling of POST
// /login in X-Forwarded-Method and X-Forwarded-Uri is allowed past the
// limit of 2, and a malformed forwarded request is answered 400 with a
// problem, as the proxy answers it.
func TestForwardAuthNoSpellingBypassesALimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeAtomic(t, path, bypassAuthRules)
	s := launch(t, "-config", path)
	allowed := 0 // what the proxy asking /auth would let through to the application
	ask := func(sp spelling) authResp {
		r := authCall(t, s.url, map[string]string{
			"X-Forwarded-Method": sp.method, "X-Forwarded-Uri": sp.target + "?x=1", "X-Forwarded-Host": "api.example.com",
		})
		if r.code == 200 {
			allowed++
		}
		return r
	}
	for i := range 2 {
		if r := ask(spelling{"POST", "/login", ""}); r.code != 200 {
			t.Fatalf("POST /login %d: %d %s", i+1, r.code, r.body)
		}
	}
	for _, sp := range loginSpellings {
		if r := ask(sp); r.code != http.StatusTooManyRequests {
			t.Errorf("%s %s after the limit: %d %s, want 429", sp.method, sp.target, r.code, r.body)
		}
	}
	if allowed != 2 {
		t.Errorf("/auth allowed %d logins, want 2 (the limit)", allowed)
	}
	for _, hdr := range []map[string]string{
		{"X-Forwarded-Method": "PO(ST", "X-Forwarded-Uri": "/login"},
		{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/%zz"},
		{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/login", "X-Forwarded-Host": "api.example.com.."},
	} {
		r := authCall(t, s.url, hdr)
		var problem struct{ Status int }
		if r.code != http.StatusBadRequest || r.hdr.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(r.body, &problem) != nil || problem.Status != 400 {
			t.Errorf("%v: %d %s %s, want a 400 problem", hdr, r.code, r.hdr.Get("Content-Type"), r.body)
		}
	}
}

// linkLocal returns a link-local IPv6 address of this machine with its
// zone, or skips the test.
func linkLocal(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skipf("SKIP: no interfaces: %v", err)
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() == nil && n.IP.IsLinkLocalUnicast() {
				return n.IP.String() + "%" + ifc.Name
			}
		}
	}
	t.Skip("SKIP: no link-local IPv6 address to be a zoned peer from")
	return ""
}

// A trusted proxy that reaches sluice proxy from a zoned IPv6 address
// (fe80::…%eth0, trusted as fe80::/10) is trusted alike by the limit key
// and by the forwarding: the limit keys on the client its X-Forwarded-For
// names, and the upstream receives that chain with the peer appended.
func TestProxyTrustsAZonedPeerOnce(t *testing.T) {
	ll := linkLocal(t)
	ln, err := net.Listen("tcp", "["+ll+"]:0")
	if err != nil {
		t.Skipf("SKIP: cannot listen on %s: %v", ll, err)
	}
	// The kernel does not report the zone back: put it in by hand.
	addr := net.JoinHostPort(ll, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	ln.Close()
	up := newCountingUpstream(t)
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	writeAtomic(t, cfg, `
trusted_proxies: [fe80::/10]
limits: [{name: per_ip, key: ip, rate: 2r/h, algorithm: token_bucket}]
routes: [{name: all, match: /, limits: [per_ip]}]
`)
	launchProxy(t, "-config", cfg, "-upstream", up.URL, "-listen", addr)
	// The proxy's printed URL has a zone that net/url will not parse as
	// written: dial its address, whatever the URL says.
	var d net.Dialer
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}}}
	defer client.CloseIdleConnections()
	var codes []int
	for _, xff := range []string{"203.0.113.7", "203.0.113.7", "203.0.113.8", "203.0.113.7"} {
		code, _ := send(t, client, "http://zoned-peer", spelling{"GET", "/x", ""}, map[string]string{"X-Forwarded-For": xff})
		codes = append(codes, code)
	}
	if want := []int{200, 200, 200, 429}; !slices.Equal(codes, want) {
		t.Errorf("codes %v, want %v: the limit does not key on the forwarded client", codes, want)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for i, v := range up.xff {
		if !strings.HasPrefix(v, "203.0.113.") || !strings.Contains(v, ", fe80::") {
			t.Errorf("request %d: the upstream got X-Forwarded-For %q, want the trusted chain and the peer", i+1, v)
		}
	}
}

// Through sluice serve's /auth, a host limit (from: host, X-Forwarded-Host)
// holds whatever the host's case, port or trailing dot; a host with two
// trailing dots is 400, as the proxy answers it.
func TestForwardAuthNoHostSpellingBypassesALimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeAtomic(t, path, `domain: edge
descriptors:
  - key: host
    value: api.example.com
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket, name: api}
forward_auth:
  descriptors:
    - entries: [{key: host, from: host}]
`)
	s := launch(t, "-config", path)
	allowed := 0
	for _, host := range []string{"api.example.com", "api.example.com", "API.EXAMPLE.COM", "api.example.com.", "api.example.com:443", "Api.Example.Com.:8080"} {
		r := authCall(t, s.url, map[string]string{"X-Forwarded-Method": "GET", "X-Forwarded-Uri": "/", "X-Forwarded-Host": host})
		if r.code == 200 {
			allowed++
		}
	}
	if allowed != 2 {
		t.Errorf("/auth allowed %d requests for api.example.com, want 2 (the limit)", allowed)
	}
	if r := authCall(t, s.url, map[string]string{"X-Forwarded-Uri": "/", "X-Forwarded-Host": "api.example.com.."}); r.code != http.StatusBadRequest {
		t.Errorf("api.example.com..: %d %s, want 400", r.code, r.body)
	}
}

// rawStatus writes req to the proxy at base as it is, and returns the
// status of the answer.
func rawStatus(t *testing.T, base, req string) int {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Through sluice proxy, written byte by byte as an attacker would: no
// spelling of a limited request reaches the upstream's handler more often
// than the limit, as three kinds of upstream route it: Go's ServeMux (an
// encoded slash inside a {id}), Node's URL parser (which would drop a
// "#...", had the proxy not sent it on as "%23") and a WSGI server (which
// reads X_API_KEY as X-API-Key, the last of two lines).
func TestProxyNoRawSpellingReachesAHandlerPastItsLimit(t *testing.T) {
	var mu sync.Mutex
	mux, node, wsgiKey := map[string]int{}, map[string]int{}, map[string]int{}
	app := http.NewServeMux()
	for _, p := range []string{"POST /users/{id}/reset", "/login", "/k/", "/"} {
		app.HandleFunc(p, func(http.ResponseWriter, *http.Request) {
			mu.Lock()
			mux[p]++
			mu.Unlock()
		})
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		path, _, _ := strings.Cut(r.RequestURI, "#")
		node[path]++
		var key string
		for name, v := range r.Header {
			if strings.EqualFold(strings.ReplaceAll(name, "_", "-"), "X-API-Key") {
				key = v[len(v)-1]
			}
		}
		wsgiKey[key]++
		mu.Unlock()
		app.ServeHTTP(w, r)
	}))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	writeAtomic(t, cfg, `
limits:
  - {name: reset, key: ip, rate: 2r/h, algorithm: token_bucket}
  - {name: login, key: ip, rate: 2r/h, algorithm: token_bucket}
  - {name: apikey, key: "header:X-API-Key", rate: 2r/h, algorithm: token_bucket, missing_key: skip}
  - {name: all, key: ip, rate: 1000r/h, algorithm: token_bucket}
routes:
  - {name: reset, match: "POST /users/{id}/reset", limits: [reset]}
  - {name: login, match: /login, methods: [POST], limits: [login]}
  - {name: k, match: /k/, limits: [apikey]}
  - {name: all, match: /, limits: [all]}
`)
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL)
	const end = "Host: app\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
	for _, target := range []string{"/users/bob/reset", "/users/bob/reset", "/users/a%2Fb/reset", "/users/x%2F..%2F/reset", "/users/bob%2F/reset", "/users/b%2Fo%2F/reset"} {
		rawStatus(t, p.url, "POST "+target+" HTTP/1.1\r\n"+end)
	}
	for _, line := range []string{"POST /login", "POST /login", "POST /login#x", "post /login#", "POST /login?a#x", "POST /login%00", "POST //login/"} {
		rawStatus(t, p.url, line+" HTTP/1.1\r\n"+end)
	}
	for _, h := range []string{
		"X-API-Key: k1\r\n", "X-API-Key: k1\r\n",
		"X-API-Key: rotating1\r\nX-API-Key: k1\r\n",
		"X-API-Key:\r\nX-API-Key: k1\r\n",
		"X_API_KEY: k1\r\n",
		"X-API-Key: rotating2\r\nX_Api_Key: k1\r\n",
	} {
		rawStatus(t, p.url, "GET /k/x HTTP/1.1\r\n"+h+end)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := mux["POST /users/{id}/reset"]; n > 2 {
		t.Errorf("a ServeMux upstream ran its reset handler %d times, limit 2", n)
	}
	if n := node["/login"]; n > 2 {
		t.Errorf("a Node upstream saw /login %d times, limit 2", n)
	}
	if n := wsgiKey["k1"]; n > 2 {
		t.Errorf("a WSGI upstream saw the API key k1 %d times, limit 2", n)
	}
}
