package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// A client that hangs up mid-body is charged what the upstream reports in
// its trailer, not the estimate: the proxy reads on after the client left
// (the upstream request is not cancelled), whether its writes to the
// client fail before the body's end or not, to find the cost. It is
// charged at least the estimate: a cost below it, reported after the
// client left, refunds nothing. Past the 1 MiB the proxy reads for the
// cost, the estimate stays.
func TestProxyChargesAClientThatHangsUpTheUpstreamsCost(t *testing.T) {
	gone := make(chan struct{}, 1) // the proxy saw the client leave
	up := streamUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gone:
		case <-r.Context().Done(): // the proxy gave up on the response
			return
		}
		chunk := []byte(strings.Repeat("x", 1<<10))
		for range atoi(r.URL.Query().Get("kib")) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Tokens", r.URL.Query().Get("cost"))
	})
	g := tokensGateway(t, up.URL)
	srv, served := watchedProxy(t, g, gone)
	for _, c := range []struct {
		cost, kib string // the cost in the trailer, after kib KiB more of body
		wantLeft  string
	}{
		{"59", "1", `"tokens";r=40;`},   // 59 charged, then 1
		{"30", "256", `"tokens";r=9;`},  // read on past the client (its writes fail): 30, then 1
		{"0", "1", `"tokens";r=7;`},     // the estimate, 1, kept; then 1
		{"50", "2048", `"tokens";r=5;`}, // past the 1 MiB read for the cost: the estimate; then 1
	} {
		hangUpMidBody(t, srv, "/stream?cost="+c.cost+"&kib="+c.kib)
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatal("the proxy did not finish the request of a client that hung up")
		}
		if resp := postAs(t, srv, "ann", "/header"); !strings.HasPrefix(resp.Header.Get("RateLimit"), c.wantLeft) {
			t.Fatalf("after hanging up on a stream that costs %s: RateLimit %q, want %s", c.cost, resp.Header.Get("RateLimit"), c.wantLeft)
		}
		// /header has no cost: its estimate stays spent.
	}
}

// watchedProxy serves g, telling gone when the client of a request to
// /stream has left and served when the proxy has finished it, also when
// it aborts.
func watchedProxy(t *testing.T, g *gateway.Gateway, gone chan<- struct{}) (srv *httptest.Server, served <-chan struct{}) {
	done := make(chan struct{}, 1)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" {
			context.AfterFunc(r.Context(), func() { gone <- struct{}{} })
			defer func() { done <- struct{}{} }()
		}
		g.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, done
}

// hangUpMidBody posts to path as ann and hangs up once the first bytes of
// the response body ("first") have arrived.
func hangUpMidBody(t *testing.T, srv *httptest.Server, path string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User", "ann")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, len("first"))); err != nil {
		t.Fatal(err)
	}
	cancel() // hang up mid-body
	resp.Body.Close()
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// A client that hangs up on a login before the upstream answered does not
// escape the count: the proxy waits on for the upstream's status, and a
// 401 counts, as if the client had stayed. Three such hang-ups against 3
// failures a minute box the key for the penalty.
func TestProxyCountsTheFailureOfAClientThatHungUp(t *testing.T) {
	arrived, gone := make(chan struct{}, 1), make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("ok") == "1" {
			return
		}
		arrived <- struct{}{}
		select {
		case <-gone:
		case <-r.Context().Done(): // the proxy gave up on the response
			return
		}
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(up.Close)
	f, err := gateway.ParseFile("proxy.yaml", []byte("upstream: "+up.URL+`
limits:
  - {name: failed-logins, key: "header:X-User", rate: 3r/m, algorithm: fixed_window, count_responses: [401], penalty: 10m}
routes: [{name: login, match: /login, limits: [failed-logins]}]
`))
	if err != nil {
		t.Fatal(err)
	}
	f.Config.Limiter = store(t, clocktest.At(time.Unix(1700000040, 0)))
	g := newGateway(t, f.Config)
	served := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("ok") != "1" {
			context.AfterFunc(r.Context(), func() { gone <- struct{}{} })
			defer func() { served <- struct{}{} }()
		}
		g.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for i := range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, "POST", srv.URL+"/login", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-User", "ann")
		errs := make(chan error, 1)
		go func() {
			resp, err := srv.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		}()
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("hang-up %d: the login never reached the upstream", i+1)
		}
		cancel() // hang up before the answer
		<-errs
		select {
		case <-served:
		case <-time.After(10 * time.Second):
			t.Fatalf("hang-up %d: the proxy did not finish the request", i+1)
		}
	}
	resp := postAs(t, srv, "ann", "/login?ok=1")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "600" {
		t.Fatalf("after 3 failed logins whose clients hung up: %d, Retry-After %q; want 429, 600 (boxed)", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// An upstream whose body never ends does not keep the request of a client
// that hung up going: the proxy reads at most its 1 MiB past the client
// for the cost, then closes the upstream's response, well before its 10 s
// bound on time would, and the estimate stays charged. Hostile: the
// upstream writes until its writes fail.
func TestProxyStopsReadingAnEndlessBodyAfterTheClientLeft(t *testing.T) {
	gone := make(chan struct{}, 1) // the proxy saw the client leave
	upDone := make(chan int64, 1)  // the bytes the upstream wrote after that
	up := streamUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		<-gone
		chunk := []byte(strings.Repeat("x", 32<<10))
		var n int64
		for {
			k, err := w.Write(chunk)
			n += int64(k)
			if err != nil {
				upDone <- n
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	g := tokensGateway(t, up.URL)
	srv, served := watchedProxy(t, g, gone)
	hangUpMidBody(t, srv, "/stream")
	start := time.Now()
	select {
	case <-served:
	case <-time.After(5 * time.Second): // half the bound on time
		t.Fatal("the proxy still reads an endless body 5 s after its client left")
	}
	select {
	case n := <-upDone:
		if n < 1<<20 {
			t.Errorf("the upstream's writes failed after %d bytes, before the 1 MiB the proxy reads for the cost", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream still writes 5 s after the proxy finished the request")
	}
	t.Logf("request finished %v after the hang-up", time.Since(start))
	if resp := postAs(t, srv, "ann", "/header"); !strings.HasPrefix(resp.Header.Get("RateLimit"), `"tokens";r=98;`) {
		t.Fatalf("after hanging up on an endless stream: RateLimit %q, want the estimate, 1, kept, then 1", resp.Header.Get("RateLimit"))
	}
}

// streamUpstream returns an upstream, closed when the test ends, that
// answers /stream (and nothing else: other paths get an empty 200) by
// declaring the X-Tokens trailer, writing and flushing "first", then
// handing the response to rest.
func streamUpstream(t *testing.T, rest http.HandlerFunc) *httptest.Server {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stream" {
			return
		}
		w.Header().Set("Trailer", "X-Tokens")
		w.Write([]byte("first"))
		w.(http.Flusher).Flush()
		rest(w, r)
	}))
	t.Cleanup(up.Close)
	return up
}
