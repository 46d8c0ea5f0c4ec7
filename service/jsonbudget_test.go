package service_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// The request bodies POST /json holds while they are read are bounded in
// bytes across all requests, not only per request: 400 connections each
// sending 1 MB and stalling took sluice serve from 90 MB to 500 MB RSS
// for the read timeout, and a connection cap of 40% of the open-file limit
// allows thousands. Past Config.MaxJSONBytesInFlight, a body being read
// is answered 503 with Retry-After, while small requests within it are
// still served; what a request held is given back when it ends.
func TestJSONBodiesInFlightAreBounded(t *testing.T) {
	h := start(t, t0, service.Config{Rules: mongo(5, config.Second), MaxJSONBytesInFlight: 64 << 10})
	addr := strings.TrimPrefix(h.http.URL, "http://")

	// A slow client: 40 KiB of a declared 100 KiB, then nothing.
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 100<<10)
	slow.Write([]byte(`{"domain":"` + strings.Repeat("x", 40<<10)))
	time.Sleep(200 * time.Millisecond) // let the server read it: a real connection, no fake clock

	small := `{"domain":"mongo_cps","descriptors":[{"entries":[{"key":"database","value":"users"}]}]}`
	if code := postStatus(t, h.http.URL, small); code != http.StatusOK {
		t.Errorf("a small request beside the slow one: %d, want 200", code)
	}
	big := `{"domain":"mongo_cps","descriptors":[{"entries":[{"key":"database","value":"` + strings.Repeat("u", 30<<10) + `"}]}]}`
	if code := postStatus(t, h.http.URL, big); code != http.StatusServiceUnavailable {
		t.Errorf("30 KiB beside 40 KiB held, with 64 KiB in all: %d, want 503", code)
	}
	slow.Close()
	time.Sleep(200 * time.Millisecond) // the server sees the close
	if code := postStatus(t, h.http.URL, big); code != http.StatusOK {
		t.Errorf("30 KiB once the slow client left: %d, want 200", code)
	}
}

func postStatus(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url+"/json", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "" {
		t.Errorf("503 without Retry-After")
	}
	return resp.StatusCode
}

// pipeServer serves a Service's Handler over in-memory connections inside
// a synctest bubble, each connection from the peer address its dialer
// names, with the HTTP read timeout sluice serve sets.
type pipeServer struct {
	conns chan net.Conn
	done  chan struct{}
	srv   *http.Server
}

// serveReadTimeout is the whole-request read timeout of a pipeServer:
// sluice serve's default.
const serveReadTimeout = 30 * time.Second

func newPipeServer(t *testing.T, cfg service.Config) *pipeServer {
	t.Helper()
	mem := memstore.New(memstore.Config{SweepInterval: -1})
	cfg.Limiter, cfg.Logger = mem, discard()
	svc, err := service.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := &pipeServer{conns: make(chan net.Conn), done: make(chan struct{})}
	p.srv = &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: serveReadTimeout, WriteTimeout: serveReadTimeout}
	go p.srv.Serve(p)
	t.Cleanup(func() {
		p.srv.Close()
		svc.Close()
		mem.Close()
		time.Sleep(time.Second) // the bubble's clock: the server's lingering closes end
	})
	return p
}

func (p *pipeServer) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeServer) Close() error {
	select {
	case <-p.done:
	default:
		close(p.done)
	}
	return nil
}

func (p *pipeServer) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8080} }

// dial opens a connection from peer (an IP address).
func (p *pipeServer) dial(t *testing.T, peer string) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	p.conns <- peerConn{server, &net.TCPAddr{IP: net.ParseIP(peer), Port: 40000}}
	return client
}

// peerConn gives a pipe's server end a client address, as TCP has.
type peerConn struct {
	net.Conn
	peer net.Addr
}

func (c peerConn) RemoteAddr() net.Addr { return c.peer }

// post sends a whole small /json request from peer and returns its status.
func (p *pipeServer) post(t *testing.T, peer, body string) int {
	t.Helper()
	c := p.dial(t, peer)
	defer c.Close()
	go fmt.Fprintf(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("POST /json from %s: %v", peer, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// stall sends the header of a /json request of total bytes and the first
// sent bytes of its body from peer, then nothing; its status arrives on
// the channel returned when the server answers (or the bubble ends).
func (p *pipeServer) stall(t *testing.T, peer string, total, sent int) (net.Conn, <-chan int) {
	t.Helper()
	c := p.dial(t, peer)
	status := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	go fmt.Fprintf(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", total, strings.Repeat("x", sent))
	return c, status
}

const smallJSON = `{"domain":"mongo_cps","descriptors":[{"entries":[{"key":"database","value":"users"}]}]}`

// One client cannot take every other client's share of the /json byte
// budget: a peer that opens connections sending all but the last byte of
// a 1 MiB body, then stalls, holds at most its share (here the default,
// 1 MiB of a 4 MiB budget) and is answered 503 past it, while another
// peer is still served. Before, four such bodies from one peer held the
// whole 4 MiB and every /json caller got 503 until the read timeout.
func TestJSONOnePeerCannotTakeTheWholeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t, service.Config{Rules: mongo(5, config.Second), MaxJSONBytesInFlight: 4 << 20})
		var conns []net.Conn
		var answers []<-chan int
		for range 4 {
			c, st := p.stall(t, "198.51.100.7", service.MaxJSONBody, service.MaxJSONBody-1)
			conns, answers = append(conns, c), append(answers, st)
			synctest.Wait() // its bytes read and counted, or refused
		}
		refused := 0
		for _, st := range answers {
			select {
			case code := <-st:
				if code != http.StatusServiceUnavailable {
					t.Errorf("a stalled body from the greedy peer answered %d, want 503 (past its share) or nothing yet", code)
				}
				refused++
			default:
			}
		}
		if refused < 3 {
			t.Errorf("the greedy peer had %d of 4 stalled 1 MiB bodies refused, want at least 3 (its share is 1 MiB)", refused)
		}
		if code := p.post(t, "203.0.113.9", smallJSON); code != http.StatusOK {
			t.Errorf("another peer beside the greedy one: %d, want 200", code)
		}
		for _, c := range conns {
			c.Close()
		}
	})
}

// A body that arrives below the minimum rate (1 KiB/s past a grace of
// the body timeout, 10 s, by default) is cut with 408, long before the
// 30 s read timeout, and what it held is given back; a slow body above the
// rate is read whole; and the rate never stretches a body past the
// server's read timeout. Before, a body trickling one byte every 5 s held
// its bytes until the read timeout and was answered 400.
func TestJSONBodyBelowMinRateIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServer(t, service.Config{Rules: mongo(5, config.Second)})
		for _, c := range []struct {
			name   string
			total  int
			chunk  int
			gap    time.Duration
			want   int
			before time.Duration // the answer comes by then
		}{
			{"one byte per 5 s", 1000, 1, 5 * time.Second, http.StatusRequestTimeout, 11 * time.Second},
			{"2 KiB/s for 20 s", 40 << 10, 2 << 10, time.Second, http.StatusOK, 21 * time.Second},
			{"2 KiB/s for 50 s", 100 << 10, 2 << 10, time.Second, http.StatusRequestTimeout, serveReadTimeout + time.Second},
		} {
			start := time.Now()
			code, msg := p.trickle(t, c.total, c.chunk, c.gap)
			took := time.Since(start)
			if c.want == http.StatusOK {
				// The body is valid JSON only when whole: a 400 naming
				// the JSON says it was read to its end.
				if code != http.StatusBadRequest || !strings.Contains(msg, "not a JSON RateLimitRequest") {
					t.Errorf("%s: %d %q after %v, want the body read whole (a 400 on its JSON)", c.name, code, msg, took)
				}
				continue
			}
			if code != c.want || took > c.before {
				t.Errorf("%s: %d %q after %v, want %d by %v", c.name, code, msg, took, c.want, c.before)
			}
			if !strings.Contains(msg, "bytes/s") {
				t.Errorf("%s: message %q does not name the minimum rate", c.name, msg)
			}
		}
		if code := p.post(t, "203.0.113.9", smallJSON); code != http.StatusOK {
			t.Errorf("after the slow bodies: %d, want 200", code)
		}
	})
}

// trickle sends a /json body of total bytes, chunk bytes every gap, and
// returns the status and body of the answer (0 and the error when the
// connection closed without one).
func (p *pipeServer) trickle(t *testing.T, total, chunk int, gap time.Duration) (int, string) {
	t.Helper()
	c := p.dial(t, "198.51.100.7")
	defer c.Close()
	stop := make(chan struct{})
	writing := make(chan struct{})
	defer func() { close(stop); c.Close(); <-writing }()
	go func() {
		defer close(writing)
		if _, err := fmt.Fprintf(c, "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", total); err != nil {
			return
		}
		for sent := 0; sent < total; sent += chunk {
			if _, err := c.Write([]byte(strings.Repeat("x", min(chunk, total-sent)))); err != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(gap):
			}
		}
	}()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err.Error() // closed without an answer
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The bounds of /json bodies that make no sense are refused by New,
// naming the field.
func TestJSONBodyBoundsRefused(t *testing.T) {
	for _, c := range []struct {
		cfg   service.Config
		field string
	}{
		{service.Config{MaxJSONBytesPerPeer: -1}, "MaxJSONBytesPerPeer"},
		{service.Config{MaxJSONBytesInFlight: 2 << 20, MaxJSONBytesPerPeer: 3 << 20}, "MaxJSONBytesPerPeer"},
		{service.Config{JSONBodyTimeout: -time.Second}, "JSONBodyTimeout"},
	} {
		c.cfg.Limiter = memstore.New(memstore.Config{SweepInterval: -1})
		_, err := service.New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.field)
		}
		c.cfg.Limiter.(*memstore.Store).Close()
	}
}
