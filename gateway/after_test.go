package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/redisstore"
)

// accounts is an upstream: /login answers 401 unless ?ok=1, /complete
// reports the tokens it spent, ?cost=, in X-Tokens.
func accounts(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			if r.URL.Query().Get("ok") != "1" {
				w.WriteHeader(http.StatusUnauthorized)
			}
		case "/complete":
			w.Header().Set("X-Tokens", r.URL.Query().Get("cost"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func proxyFile(t *testing.T, up *httptest.Server, clock *clocktest.Clock, yaml string) *httptest.Server {
	t.Helper()
	f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: "+up.URL+"\n"+yaml))
	if err != nil {
		t.Fatal(err)
	}
	f.Config.Limiter = store(t, clock)
	_, srv := front(t, f.Config)
	return srv
}

func postAs(t *testing.T, srv *httptest.Server, user, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("POST", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User", user)
	return send(t, srv.Client(), req)
}

// refusedForExactly checks that ann's POST of path is refused (429) until
// clock has moved d, to the nanosecond, and admitted (200) then; when
// names that moment in failures.
func refusedForExactly(t *testing.T, srv *httptest.Server, clock *clocktest.Clock, d time.Duration, path, when string) {
	t.Helper()
	clock.Advance(d - time.Nanosecond)
	if resp := postAs(t, srv, "ann", path); resp.StatusCode != 429 {
		t.Errorf("1 ns before %s: %d, want 429", when, resp.StatusCode)
	}
	clock.Advance(time.Nanosecond)
	if resp := postAs(t, srv, "ann", path); resp.StatusCode != 200 {
		t.Errorf("when %s: %d, want 200", when, resp.StatusCode)
	}
}

// Through the proxy: 5 failed logins within a minute put the user in the
// penalty box for 10 minutes (the reason header names the limit), successful
// logins do not count, and the box ends on time.
func TestProxyPenaltyBoxForFailedLogins(t *testing.T) {
	clock := clocktest.At(time.Unix(1700000040, 0))
	srv := proxyFile(t, accounts(t), clock, `
limits:
  - {name: failed-logins, key: "header:X-User", rate: 5r/m, algorithm: fixed_window, count_responses: [401, 403], penalty: 10m}
routes: [{name: login, match: /login, limits: [failed-logins]}]
`)
	for range 10 {
		if resp := postAs(t, srv, "ann", "/login?ok=1"); resp.StatusCode != 200 {
			t.Fatalf("successful login: %d", resp.StatusCode)
		}
	}
	for i := range 5 {
		if resp := postAs(t, srv, "ann", "/login"); resp.StatusCode != 401 {
			t.Fatalf("failed login %d: %d, want the upstream's 401", i+1, resp.StatusCode)
		}
		clock.Advance(5 * time.Second)
	}
	resp := postAs(t, srv, "ann", "/login?ok=1")
	if resp.StatusCode != 429 || resp.Header.Get(httplimit.ReasonHeader) != "failed-logins" || resp.Header.Get("Retry-After") != "595" {
		t.Fatalf("boxed: %d, reason %q, Retry-After %q; want 429, failed-logins, 595 (boxed 5 s ago)", resp.StatusCode, resp.Header.Get(httplimit.ReasonHeader), resp.Header.Get("Retry-After"))
	}
	refusedForExactly(t, srv, clock, 595*time.Second, "/login?ok=1", "the box ends")
}

// Through the proxy: cost_from_response_header settles each request at the
// tokens the upstream reports; the next response's RateLimit says what is
// left, and a key in debt waits exactly what it owes.
func TestProxySettlesFromTheResponseHeader(t *testing.T) {
	clock := clocktest.New()
	srv := proxyFile(t, accounts(t), clock, `
limits:
  - {name: tokens, key: "header:X-User", rate: 100r/m, burst: 100, algorithm: token_bucket}
routes: [{name: llm, match: /complete, limits: [{name: tokens, cost_from_response_header: X-Tokens}]}]
`)
	postAs(t, srv, "ann", "/complete?cost=60")
	if got := postAs(t, srv, "ann", "/complete?cost=90").Header.Get("RateLimit"); !strings.HasPrefix(got, `"tokens";r=39;`) {
		t.Fatalf("after 60 tokens: RateLimit %q, want r=39 (60 settled, 1 estimated)", got)
	}
	// 150 spent of 100: 50 owed, 30 s at 600 ms a token, and the next
	// request's own token.
	resp := postAs(t, srv, "ann", "/complete?cost=1")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "31" {
		t.Fatalf("in debt: %d, Retry-After %q; want 429, 31 (30.6 s rounded up)", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	refusedForExactly(t, srv, clock, 30600*time.Millisecond, "/complete?cost=1", "the debt is paid")
}

// tokensUpstream reports a request's cost, ?cost=, in X-Tokens: as a header
// (/header), in a 103 and the final header (/hints), as an undeclared
// trailer (/undeclared) or else as a declared one, with other headers and
// trailers beside it.
func tokensUpstream(t *testing.T) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cost := r.URL.Query().Get("cost")
		w.Header().Set("X-Other", "kept")
		switch r.URL.Path {
		case "/header":
			w.Header().Set("X-Tokens", cost)
			return
		case "/hints": // and in an interim response before it
			w.Header().Set("Link", "</a.css>; rel=preload")
			w.Header().Set("X-Tokens", cost)
			w.WriteHeader(http.StatusEarlyHints)
			return
		case "/undeclared": // a trailer the header did not announce
			w.Write([]byte("streamed"))
			w.(http.Flusher).Flush() // chunked, so that it can have trailers
			w.Header().Set(http.TrailerPrefix+"X-Tokens", cost)
			return
		}
		w.Header().Set("Trailer", "X-Tokens, X-Other-Trailer")
		w.Write([]byte("streamed"))
		w.Header().Set("X-Tokens", cost)
		w.Header().Set("X-Other-Trailer", "kept")
	}))
	t.Cleanup(up.Close)
	return up
}

// The cost header and trailer are the upstream's word to the proxy, not
// to the client: with cost_from_response_header, the client receives
// neither (as NGINX's proxy_hide_header), while the request is still
// settled at that cost, and the upstream's other headers and trailers
// pass.
func TestProxyHidesTheCostHeaderAndTrailerFromTheClient(t *testing.T) {
	up := tokensUpstream(t)
	srv := proxyFile(t, up, clocktest.New(), tokensLimits)
	for _, c := range []struct{ path, wantLeft string }{
		{"/header?cost=30", `"tokens";r=99;`},    // the estimate, 1, reported
		{"/trailer?cost=20", `"tokens";r=69;`},   // 30 settled, then 1
		{"/undeclared?cost=9", `"tokens";r=49;`}, // 20 settled, then 1
		{"/header?cost=1", `"tokens";r=40;`},     // 9 settled, then 1
	} {
		resp := postAs(t, srv, "ann", c.path)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("RateLimit"), c.wantLeft) {
			t.Fatalf("%s: %d, RateLimit %q; want 200, %s (the previous cost settled)", c.path, resp.StatusCode, resp.Header.Get("RateLimit"), c.wantLeft)
		}
		if v, ok := resp.Header["X-Tokens"]; ok {
			t.Errorf("%s: the client got the cost header X-Tokens: %q", c.path, v)
		}
		if v, ok := resp.Trailer["X-Tokens"]; ok {
			t.Errorf("%s: the client got the cost trailer X-Tokens: %q", c.path, v)
		}
		if resp.Header.Get("X-Other") != "kept" {
			t.Errorf("%s: X-Other %q, want the upstream's other headers passed", c.path, resp.Header.Get("X-Other"))
		}
		if strings.HasPrefix(c.path, "/trailer") && resp.Trailer.Get("X-Other-Trailer") != "kept" {
			t.Errorf("%s: trailers %v, want X-Other-Trailer passed", c.path, resp.Trailer)
		}
	}
	var interim []http.Header
	trace := &httptrace.ClientTrace{Got1xxResponse: func(_ int, h textproto.MIMEHeader) error {
		interim = append(interim, http.Header(h))
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "POST", srv.URL+"/hints?cost=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User", "ann")
	resp := send(t, srv.Client(), req)
	if len(interim) != 1 || interim[0].Get("Link") == "" {
		t.Fatalf("interim responses %v, want the 103 with its Link", interim)
	}
	if v, ok := interim[0]["X-Tokens"]; ok {
		t.Errorf("the client got the cost header X-Tokens in a 103: %q", v)
	}
	if v, ok := resp.Header["X-Tokens"]; ok || resp.StatusCode != 200 {
		t.Errorf("after a 103: %d, X-Tokens %q; want 200 without it", resp.StatusCode, v)
	}
}

// The keys are checked where they are written.
func TestProxyFileRefusesBadCountAndCost(t *testing.T) {
	want := map[string]string{
		"bad status": "is not a status", "queue counts": "need an algorithm", "log counts": "cannot",
		"zero penalty": "not a positive duration", "cost on queue": "is a queue", "cost bad name": "not a header name",
		"cost and count": "does not go with count_responses",
	}
	for name, yaml := range map[string]string{
		"bad status":     `limits: [{name: l, key: ip, rate: 5r/m, algorithm: fixed_window, count_responses: [600]}]`,
		"queue counts":   `limits: [{name: l, key: ip, rate: 5r/m, count_responses: [401]}]`,
		"log counts":     `limits: [{name: l, key: ip, rate: 5r/m, algorithm: sliding_log, count_responses: 4xx}]`,
		"zero penalty":   `limits: [{name: l, key: ip, rate: 5r/m, algorithm: fixed_window, penalty: 0s}]`,
		"cost on queue":  "limits: [{name: l, key: ip, rate: 5r/m}]\nroutes: [{name: r, match: /, limits: [{name: l, cost_from_response_header: X-Cost}]}]",
		"cost bad name":  "limits: [{name: l, key: ip, rate: 5r/m, algorithm: token_bucket}]\nroutes: [{name: r, match: /, limits: [{name: l, cost_from_response_header: \"a b\"}]}]",
		"cost and count": "limits: [{name: l, key: ip, rate: 5r/m, algorithm: token_bucket, count_responses: [401]}]\nroutes: [{name: r, match: /, limits: [{name: l, cost_from_response_header: X-Cost}]}]",
	} {
		_, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\n"+yaml))
		if err == nil || !strings.Contains(err.Error(), want[name]) {
			t.Errorf("%s: %v, want an error saying %q", name, err, want[name])
		}
	}
}

// Two proxies sharing Redis share the count and the penalty box: failed
// logins through one box the user on the other, with the box's time left
// (Redis's own clock, so within a second of it).
func TestProxyPenaltyBoxIsSharedOnRedis(t *testing.T) {
	rs, err := redisstore.New(context.Background(), redisstore.Config{URL: "redis://" + redistest.Single(t).Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	up := accounts(t)
	name := "logins" + strconv.FormatInt(time.Now().UnixNano(), 36) // the server outlives a -count=N run
	yaml := "upstream: " + up.URL + `
limits:
  - {name: ` + name + `, key: "header:X-User", rate: 5r/m, algorithm: fixed_window, count_responses: 401, penalty: 10m}
routes: [{name: login, match: /login, limits: [` + name + `]}]
`
	var fronts [2]*httptest.Server
	for i := range fronts {
		f, err := gateway.ParseFile("proxy.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		f.Config.Limiter = rs
		_, fronts[i] = front(t, f.Config)
	}
	for i := range 5 {
		if resp := postAs(t, fronts[i%2], "ann", "/login"); resp.StatusCode != 401 {
			t.Fatalf("failed login %d: %d", i+1, resp.StatusCode)
		}
	}
	for _, srv := range fronts {
		resp := postAs(t, srv, "ann", "/login?ok=1")
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != 429 || resp.Header.Get(httplimit.ReasonHeader) != name || ra < 599 || ra > 600 {
			t.Errorf("boxed on Redis: %d, reason %q, Retry-After %q; want 429, %s, 599 or 600", resp.StatusCode, resp.Header.Get(httplimit.ReasonHeader), resp.Header.Get("Retry-After"), name)
		}
	}
	if resp := postAs(t, fronts[0], "bob", "/login?ok=1"); resp.StatusCode != 200 {
		t.Errorf("another user: %d, want 200", resp.StatusCode)
	}
}

// A route's cost header is hidden from the client and read from the
// upstream's response, so a name that cannot be both is refused, in the
// file with its line and by New: a hop-by-hop header (the proxy drops it
// from the upstream's response, and the cost would never be read), one
// the client needs to read the response (its framing, Retry-After,
// cookies) and one the limits write themselves (their own value would be
// read as the cost, and hidden from the client).
func TestCostHeaderTheClientNeedsOrThatNeverArrivesIsRefused(t *testing.T) {
	for _, name := range []string{"Keep-Alive", "connection", "Trailer", "Content-Length", "Retry-After", "Set-Cookie", "RateLimit", "X-RateLimit-Remaining", "Sluice-Rate-Limited-Reason"} {
		_, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\nlimits: [{name: l, key: ip, rate: 5r/m, algorithm: token_bucket}]\n"+
			"routes: [{name: r, match: /, limits: [{name: l, cost_from_response_header: "+name+"}]}]"))
		if err == nil || !strings.Contains(err.Error(), "proxy.yaml:3:") || !strings.Contains(err.Error(), name) {
			t.Errorf("cost_from_response_header: %s: %v, want it refused at line 3", name, err)
		}
		cfg := gateway.Config{
			Upstreams: []gateway.Upstream{{Name: "u", URL: mustURL(t, "http://127.0.0.1:1")}},
			Settings:  httplimit.Settings{Limiter: store(t, clocktest.New())},
			Routes: []gateway.Route{{Name: "r", Patterns: []string{"/"}, Policies: []httplimit.Policy{{
				Name: "l", Key: httplimit.Global(), Limit: sluice.Limit{Rate: 5, Period: time.Minute, Burst: 5, Algorithm: sluice.TokenBucket},
				Settle: &httplimit.Settle{Header: name},
			}}}},
		}
		if g, err := gateway.New(cfg); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Settle.Header %s: New: %v, want it refused", name, err)
			if g != nil {
				g.Close()
			}
		}
	}
	for _, name := range []string{"X-Tokens", "Sluice-Cost"} { // its own header: fine
		if _, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\nlimits: [{name: l, key: ip, rate: 5r/m, algorithm: token_bucket}]\n"+
			"routes: [{name: r, match: /, limits: [{name: l, cost_from_response_header: "+name+"}]}]")); err != nil {
			t.Errorf("cost_from_response_header: %s: %v", name, err)
		}
	}
}

// tokensLimits are the limits and route of a proxy file in front of an
// upstream that reports each response's tokens in X-Tokens: 100 tokens a
// minute for each X-User, every request settled at its tokens.
const tokensLimits = `
limits:
  - {name: tokens, key: "header:X-User", rate: 100r/m, burst: 100, algorithm: token_bucket}
routes: [{name: llm, match: /, limits: [{name: tokens, cost_from_response_header: X-Tokens}]}]
`

// tokensGateway is a gateway in front of upstream with tokensLimits, on a
// store of its own.
func tokensGateway(t *testing.T, upstream string) *gateway.Gateway {
	t.Helper()
	f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: "+upstream+tokensLimits))
	if err != nil {
		t.Fatal(err)
	}
	f.Config.Limiter = store(t, clocktest.New())
	return newGateway(t, f.Config)
}

// Over HTTP/2, whose trailers are frames of their own, the client gets
// neither the cost trailer (declared or not) nor the cost header, and the
// proxy still settles the cost they carry.
func TestProxyHidesTheCostTrailerOverHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(tokensGateway(t, tokensUpstream(t).URL))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	for _, c := range []struct{ path, wantLeft string }{
		{"/trailer?cost=20", `"tokens";r=99;`},
		{"/undeclared?cost=9", `"tokens";r=79;`}, // 20 settled, then 1
		{"/header?cost=1", `"tokens";r=70;`},     // 9 settled, then 1
	} {
		resp := postAs(t, srv, "ann", c.path)
		if resp.ProtoMajor != 2 || resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("RateLimit"), c.wantLeft) {
			t.Fatalf("%s: %s %d, RateLimit %q; want HTTP/2 200, %s (the previous cost settled)", c.path, resp.Proto, resp.StatusCode, resp.Header.Get("RateLimit"), c.wantLeft)
		}
		_, inHeader := resp.Header["X-Tokens"]
		_, inTrailer := resp.Trailer["X-Tokens"]
		if inHeader || inTrailer {
			t.Errorf("%s: the client got X-Tokens: header %v, trailers %v", c.path, resp.Header, resp.Trailer)
		}
		if strings.HasPrefix(c.path, "/trailer") && resp.Trailer.Get("X-Other-Trailer") != "kept" {
			t.Errorf("%s: trailers %v, want X-Other-Trailer passed", c.path, resp.Trailer)
		}
	}
}

// A 101 (a WebSocket upgrade) is passed on by the proxy writing the
// upstream's header onto the hijacked connection itself: the cost header
// is taken off it too (and not settled: the estimate stays spent).
func TestProxyHidesTheCostHeaderOfA101(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: test\r\nX-Tokens: 5\r\nX-Other: kept\r\n\r\n")
		brw.Flush()
	}))
	t.Cleanup(up.Close)
	srv := proxyFile(t, up, clocktest.New(), tokensLimits)
	req, err := http.NewRequest("GET", srv.URL+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "test")
	req.Header.Set("X-User", "ann")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, ok := resp.Header["X-Tokens"]; ok || resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Other") != "kept" {
		t.Errorf("upgrade: %d, header %v; want 101 without X-Tokens, with X-Other", resp.StatusCode, resp.Header)
	}
}
