package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/promtest"
)

// pipeListener is an in-memory listener for a synctest bubble: Dial
// connects to it through net.Pipe, whose deadlines run on the bubble's
// clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr }

func (l *pipeListener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- addrConn{server}:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

var pipeAddr = &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4321}

// addrConn gives a pipe's server end a client address, as a TCP
// connection has.
type addrConn struct{ net.Conn }

func (addrConn) RemoteAddr() net.Addr { return pipeAddr }

// bubbleProxy is a Gateway in front of an upstream, both served over
// pipes inside a synctest bubble.
type bubbleProxy struct {
	front, up *pipeListener
	closers   []func()
}

// newBubbleProxy serves upstream and a Gateway of cfg (its upstream and
// transport filled in) with timeouts; call close before the bubble ends.
func newBubbleProxy(t *testing.T, cfg gateway.Config, upstream http.HandlerFunc) *bubbleProxy {
	t.Helper()
	p := &bubbleProxy{front: newPipeListener(), up: newPipeListener()}
	upSrv := &http.Server{Handler: upstream}
	go upSrv.Serve(p.up)
	tr := &http.Transport{DialContext: p.up.Dial}
	cfg.Transport = tr
	cfg.Upstreams = []gateway.Upstream{{Name: "app", URL: mustURL(t, "http://app.test"), MaxInFlight: cfg.MaxInFlight}}
	cfg.Logger = quiet
	g, err := gateway.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := cfg.Timeouts.Server(g, quiet)
	go srv.Serve(p.front)
	p.closers = []func(){func() { srv.Close() }, tr.CloseIdleConnections, func() { upSrv.Close() }}
	return p
}

func (p *bubbleProxy) close() {
	for _, c := range p.closers {
		c()
	}
}

// dial opens a connection to the proxy on which reads and writes give up
// after a minute, and a reader of its responses; the caller closes it.
func (p *bubbleProxy) dial(t *testing.T) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := p.front.Dial(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(time.Minute))
	return c, bufio.NewReader(c)
}

// readResponse reads a response from br and the whole of its body; an
// error fails the test.
func readResponse(t *testing.T, br *bufio.Reader) *http.Response {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return drained(t, resp)
}

// client returns an HTTP client of the proxy.
func (p *bubbleProxy) client() (*http.Client, func()) {
	tr := &http.Transport{DialContext: p.front.Dial}
	return &http.Client{Transport: tr}, tr.CloseIdleConnections
}

// slowPost sends a POST's header and the first n bytes of a body of
// length total, then stalls; it returns the response's status (0 if none
// came within a minute) and when it came.
func (p *bubbleProxy) slowPost(t *testing.T, total, n int) (int, time.Time) {
	return p.trickledPost(t, total, n, 0, 0, time.Minute)
}

// get sends a GET of path through a new client of the proxy and returns
// the response's status.
func (p *bubbleProxy) get(t *testing.T, path string) int {
	t.Helper()
	c, closeClient := p.client()
	defer closeClient()
	resp, err := c.Get("http://app.test" + path)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// streamedBodyCut checks what a streamed body cut by the body timeout
// shows: the client got 408 (code, at the time at) no sooner than
// bodyTimeout after start and no later than latest after it, the upstream
// saw the one request (reached), and the request's place in flight is
// freed: the next request is served. how says how the body was sent.
func (p *bubbleProxy) streamedBodyCut(t *testing.T, how string, code int, start, at time.Time, latest time.Duration, reached *atomic.Int64) {
	t.Helper()
	if code != http.StatusRequestTimeout {
		t.Fatalf("%s: status %d, want 408", how, code)
	}
	if d := at.Sub(start); d < bodyTimeout || d > latest {
		t.Errorf("%s: answered after %v, want about the body timeout %v", how, d, bodyTimeout)
	}
	if reached.Load() != 1 {
		t.Errorf("%s: the upstream saw %d requests, want 1 (the body streamed)", how, reached.Load())
	}
	if code := p.get(t, "/after"); code != http.StatusOK {
		t.Errorf("after the %s: %d, want 200 (its place freed)", how, code)
	}
}

// bodyTimeout is the body timeout of a bodyTimeoutProxy.
const bodyTimeout = 2 * time.Second

// bodyTimeoutProxy is a bubble proxy with maxInFlight places and a body
// timeout of bodyTimeout in front of a discardCounting upstream, whose
// count it returns.
func bodyTimeoutProxy(t *testing.T, maxInFlight int) (*bubbleProxy, *atomic.Int64) {
	t.Helper()
	reached := new(atomic.Int64)
	return newBubbleProxy(t, gateway.Config{MaxInFlight: maxInFlight, Timeouts: gateway.Timeouts{ClientBody: bodyTimeout}}, discardCounting(reached)), reached
}

// discardCounting is an upstream that counts its requests in n and reads
// their bodies.
func discardCounting(n *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		io.Copy(io.Discard, r.Body)
	}
}

// The slow-body attack: five clients each send a POST's header and one
// byte of a 1000-byte body, then stall, against max_in_flight 5. A normal
// request one second later is served (the slow ones hold no place: their
// bodies have not arrived), and each slow one ends with 408 when its body
// has stalled for the body timeout.
func TestSlowBodiesHoldNoInFlightPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, reached := bodyTimeoutProxy(t, 5)
		defer p.close()
		start := time.Now()
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				code, at := p.slowPost(t, 1000, 1)
				if code != http.StatusRequestTimeout {
					t.Errorf("slow client: status %d, want 408", code)
				} else if d := at.Sub(start); d < bodyTimeout || d > bodyTimeout+time.Second {
					t.Errorf("slow client answered after %v, want the body timeout %v", d, bodyTimeout)
				}
			})
		}
		time.Sleep(time.Second) // fake time: the bubble's clock
		if code := p.get(t, "/normal"); code != http.StatusOK {
			t.Errorf("normal request during the slow bodies: %d, want 200", code)
		}
		wg.Wait()
		if n := reached.Load(); n != 1 {
			t.Errorf("the upstream saw %d requests, want 1 (none of the stalled ones)", n)
		}
	})
}

// A body larger than the gateway's buffer streams to the upstream and
// counts in flight meanwhile; when it stalls for the body timeout the
// client gets 408 (not the upstream's 502 or 504) and its place is freed.
func TestStreamedBodyStallIs408(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, reached := bodyTimeoutProxy(t, 1)
		defer p.close()
		start := time.Now()
		code, at := p.slowPost(t, 100<<10, 40<<10)
		p.streamedBodyCut(t, "stalled upload", code, start, at, bodyTimeout+time.Second, reached)
	})
}

// A client that stops reading a streamed response loses its connection
// after the send timeout (NGINX's send_timeout, between two writes), and
// the upstream request ends with it; a slow reader that keeps reading is
// not cut, however long the stream.
func TestSendTimeoutEndsAStalledReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const sendTimeout = 2 * time.Second
		upstreamDone := make(chan time.Time, 1)
		p := newBubbleProxy(t, gateway.Config{Timeouts: gateway.Timeouts{Send: sendTimeout}},
			func(w http.ResponseWriter, r *http.Request) {
				defer func() { upstreamDone <- time.Now() }()
				chunk := []byte(strings.Repeat("y", 8<<10))
				// A length, so that ReverseProxy copies without its flush
				// timer, whose goroutine waits on a mutex the bubble
				// cannot see through while a write is blocked.
				size := 1 << 30
				if r.URL.Path == "/finite" {
					size = 20 * len(chunk)
				}
				w.Header().Set("Content-Length", strconv.Itoa(size))
				for i := 0; ; i++ {
					if r.URL.Path == "/finite" && i == 20 {
						return
					}
					if _, err := w.Write(chunk); err != nil {
						return
					}
					if r.URL.Path == "/finite" {
						time.Sleep(time.Second) // a slow stream, read at once
					}
				}
			})
		defer p.close()
		c, closeClient := p.client()
		defer closeClient()

		// A stream of 20 s, written every second: each write is prompt.
		resp, err := c.Get("http://app.test/finite")
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != 20*8<<10 {
			t.Fatalf("slow stream: read %d bytes, %v; want all of it", n, err)
		}
		<-upstreamDone

		resp, err = c.Get("http://app.test/endless")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		stopped := time.Now() // reads nothing more
		select {
		case at := <-upstreamDone:
			if d := at.Sub(stopped); d < sendTimeout || d > sendTimeout+2*time.Second {
				t.Errorf("the stalled stream ended after %v, want about the send timeout %v", d, sendTimeout)
			}
		case <-time.After(time.Minute):
			t.Fatal("a client that reads nothing held its stream for a minute")
		}
	})
}

// A conns limit (limit_conn) counts a request only once its body is here:
// a client stalling in its body holds no slot.
func TestSlowBodyHoldsNoConnSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newBubbleProxy(t, gateway.Config{
			Timeouts: gateway.Timeouts{ClientBody: bodyTimeout},
			Routes: []gateway.Route{{Name: "all", Patterns: []string{"/"},
				Concurrency: []httplimit.ConcurrencyPolicy{{Name: "one", Max: 1}}}},
		}, func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
		defer p.close()
		done := make(chan int, 1)
		go func() {
			code, _ := p.slowPost(t, 1000, 10)
			done <- code
		}()
		time.Sleep(time.Second)
		if code := p.get(t, "/normal"); code != http.StatusOK {
			t.Errorf("normal request beside a stalled body: %d, want 200", code)
		}
		if code := <-done; code != http.StatusRequestTimeout {
			t.Errorf("stalled body: %d, want 408", code)
		}
	})
}

// Bodies reach the upstream whole through the read-ahead, over HTTP/1.1
// and HTTP/2, small (read first) and large (streamed past the buffer).
func TestBodiesForwardedWhole(t *testing.T) {
	up := newUpstream(t)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("the upstream reading the body: %v", err)
		}
		fmt.Fprintf(w, "%d %d", len(b), strings.Count(string(b), "z"))
	})
	for _, h2 := range []bool{false, true} {
		srv := httptest.NewUnstartedServer(newGateway(t, direct(t, up)))
		srv.EnableHTTP2 = h2
		srv.StartTLS()
		defer srv.Close()
		for _, n := range []int{1, 16 << 10, 16<<10 + 1, 1 << 20} {
			for _, chunked := range []bool{false, true} {
				var body io.Reader = strings.NewReader(strings.Repeat("z", n))
				if chunked {
					body = io.MultiReader(body) // no length known: chunked
				}
				resp, err := srv.Client().Post(srv.URL+"/up", "text/plain", body)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("%d %d", n, n); resp.StatusCode != 200 || string(got) != want {
					t.Errorf("h2 %v, %d bytes, chunked %v: %d %q, want 200 %q", h2, n, chunked, resp.StatusCode, got, want)
				}
			}
		}
	}
}

// Over HTTP/2 too, a stream whose body stalls for the body timeout gets
// 408, and its place in flight is not taken meanwhile.
func TestSlowBodyOverHTTP2(t *testing.T) {
	up := newUpstream(t)
	cfg := direct(t, up)
	cfg.MaxInFlight = 1
	cfg.Timeouts.ClientBody = time.Second // room to see it stalled on a loaded machine
	reg := prometheus.NewRegistry()
	m, err := gateway.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics = m
	srv := httptest.NewUnstartedServer(newGateway(t, cfg))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	c := srv.Client()
	pr, pw := io.Pipe()
	defer pw.Close()
	go pw.Write([]byte("x")) // one byte, then nothing
	req, _ := http.NewRequest("POST", srv.URL+"/upload", pr)
	req.ContentLength = 1000
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	// Wait until the body is being read (polling a gauge, not sleeping).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if promtest.Value(t, reg, "sluice_proxy_reading_body", "", "") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stalled body was never being read")
		}
	}
	if code := get(t, c, srv.URL+"/normal").StatusCode; code != 200 {
		t.Errorf("beside a stalled HTTP/2 body: %d, want 200", code)
	}
	resp := <-done
	if resp == nil {
		return
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled body: %s %d, want HTTP/2 408", resp.Proto, resp.StatusCode)
	}
	if up.hits.Load() != 1 {
		t.Fatalf("the upstream saw %d requests, want 1", up.hits.Load())
	}
}

// A keep-alive connection idle for longer than the send timeout still
// takes a request that expects 100 Continue: the interim response is not
// written under the last response's expired deadline.
func TestExpectContinueAfterIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const sendTimeout = 2 * time.Second
		p := newBubbleProxy(t, gateway.Config{Timeouts: gateway.Timeouts{Send: sendTimeout}},
			func(w http.ResponseWriter, r *http.Request) {
				b, err := io.ReadAll(r.Body)
				if err != nil {
					t.Errorf("the upstream reading the body: %v", err)
				}
				fmt.Fprintf(w, "got %d", len(b))
			})
		defer p.close()
		c, br := p.dial(t)
		defer c.Close()
		go io.WriteString(c, "GET /first HTTP/1.1\r\nHost: app.test\r\n\r\n")
		readResponse(t, br)

		time.Sleep(2 * sendTimeout) // idle, within keepalive_timeout
		go io.WriteString(c, "POST /second HTTP/1.1\r\nHost: app.test\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != http.StatusContinue {
			t.Fatalf("interim response: %v %v, want 100 Continue", resp, err)
		}
		go io.WriteString(c, "hello")
		for resp.StatusCode < 200 { // the upstream's own 100 Continue, passed on
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || string(b) != "got 5" {
			t.Fatalf("final response: %d %q", resp.StatusCode, b)
		}
	})
}

// A request answered without its body being read (403 here; 429 and 503
// alike) leaves the server to discard the rest before the connection can
// be reused: that discard is bounded by the body timeout too, so a client
// that stalls in a refused body loses its connection instead of holding
// it forever.
func TestRefusedBodyDiscardIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newBubbleProxy(t, gateway.Config{
			Timeouts: gateway.Timeouts{ClientBody: bodyTimeout},
			Routes:   []gateway.Route{{Name: "ro", Patterns: []string{"/"}, Methods: []string{"GET"}}},
		}, func(w http.ResponseWriter, r *http.Request) {})
		defer p.close()
		c, br := p.dial(t)
		defer c.Close()
		go io.WriteString(c, "POST /x HTTP/1.1\r\nHost: app.test\r\nContent-Length: 1000\r\n\r\nx")
		if resp := readResponse(t, br); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("status %d, want 403", resp.StatusCode)
		}
		answered := time.Now()
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("more bytes after the response")
		}
		if d := time.Since(answered); d > bodyTimeout+time.Second {
			t.Fatalf("the connection of a stalled, refused body was held %v, want at most the body timeout %v", d, bodyTimeout)
		}
	})
}
