package gateway_test

import (
	"bufio"
	"bytes"
	"cmp"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/rlheader"
)

// discardWriter is a ResponseWriter that keeps the status and drops the
// body, reused across requests (its header cleared), so that a benchmark
// counts the gateway's own allocations.
type discardWriter struct {
	h    http.Header
	code int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }

// refusingGateway is a gateway whose one route's limit has refused its
// client already: every request after the first is a 429. With log, the
// access log writes each refusal to io.Discard; the program's log is at
// warn either way. It counts into Prometheus metrics, as sluice proxy
// always does.
func refusingGateway(tb testing.TB, log bool) *gateway.Gateway {
	reg := prometheus.NewRegistry()
	limits, err := httplimit.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	metrics, err := gateway.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return gatewayOf(tb, `
limits: [{name: l, key: ip, rate: 1r/m, nodelay: true}]
routes: [{name: api, match: /api/, limits: [l]}]
`, "http://upstream.invalid", canned{}, func(c *gateway.Config) {
		c.Limits, c.Metrics = limits, metrics
		// As bench/proxy.sh runs it: -log-level warn, so that no
		// refusal reaches the program's log.
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if log {
			c.AccessLog = io.Discard
		}
	})
}

// BenchmarkGatewayRefusal is the CPU and allocations of one refused
// request through the gateway's handler (routing, the decision, the 429
// with its headers and body), request and writer reused: the proxy's
// cost of a refusal, which forwards nothing. Sub-benchmarks: the access
// log off, and on (to io.Discard).
func BenchmarkGatewayRefusal(b *testing.B) {
	for _, log := range []bool{false, true} {
		name := "log=off"
		if log {
			name = "log=on"
		}
		b.Run(name, func(b *testing.B) {
			g := refusingGateway(b, log)
			r := httptest.NewRequest("GET", "/api/users/42", nil)
			w := &discardWriter{h: http.Header{}}
			g.ServeHTTP(w, r) // the one admitted
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				g.ServeHTTP(w, r)
				if w.code != http.StatusTooManyRequests {
					b.Fatalf("status %d", w.code)
				}
			}
		})
	}
}

// A refusal's problem body, made once per route, is what encoding it per
// request wrote: the same JSON, Content-Type and Content-Length, for the
// default status and a configured one.
func TestRefusalBodyIsTheEncodedProblem(t *testing.T) {
	for _, status := range []int{0, 503} {
		g := gatewayOf(t, `
limits: [{name: l, key: ip, rate: 1r/m, nodelay: true}]
routes: [{name: api, match: /api/, limits: [l]}]
`, "http://upstream.invalid", canned{}, func(c *gateway.Config) { c.StatusCode = status })
		served(g, "GET", "/api/x")
		w := served(g, "GET", "/api/x")
		want := cmp.Or(status, http.StatusTooManyRequests)
		body, err := rlheader.QuotaExceeded(want, "l").MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if w.Code != want || w.Body.String() != string(body) ||
			w.Header().Get("Content-Type") != rlheader.ProblemContentType ||
			w.Header().Get("Content-Length") != strconv.Itoa(len(body)) ||
			w.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("status %d: got %d %q, headers %v; want %d %s", status, w.Code, w.Body, w.Header(), want, body)
		}
	}
}

// BenchmarkGatewayRefusalServer is one refused request through net/http's
// server in front of the gateway, over a keep-alive loopback connection:
// what bench/proxy.sh's limited row costs sluice proxy per request,
// request parsing and the response's writing included, on the server
// sluice proxy runs (Timeouts.Server: its header and keep-alive
// timeouts). The client writes
// the request's bytes and reads the answer with buffers reused, so that
// the allocations counted are the server's. Sub-benchmarks: the access
// log off, and on (to io.Discard).
func BenchmarkGatewayRefusalServer(b *testing.B) {
	for _, log := range []bool{false, true} {
		name := "log=off"
		if log {
			name = "log=on"
		}
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewUnstartedServer(nil)
			srv.Config = gateway.Timeouts{}.Server(refusingGateway(b, log), nil)
			srv.Start()
			defer srv.Close()
			c := dialRaw(b, srv.Listener.Addr().String())
			c.roundTrip(b) // the one admitted (to an upstream that does not resolve)
			b.ReportAllocs()
			for b.Loop() {
				if code := c.roundTrip(b); code != http.StatusTooManyRequests {
					b.Fatalf("status %d", code)
				}
			}
		})
	}
}

// rawClient sends one GET at a time on a keep-alive connection and reads
// the answer by its Content-Length, allocating nothing per request.
type rawClient struct {
	conn net.Conn
	br   *bufio.Reader
	req  []byte
}

func dialRaw(tb testing.TB, addr string) *rawClient {
	tb.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return &rawClient{
		conn: conn, br: bufio.NewReaderSize(conn, 4096),
		req: []byte("GET /api/users/42 HTTP/1.1\r\nHost: api.example.com\r\nUser-Agent: wrk\r\n\r\n"),
	}
}

// roundTrip sends the request and returns the answer's status.
func (c *rawClient) roundTrip(tb testing.TB) int {
	if _, err := c.conn.Write(c.req); err != nil {
		tb.Fatal(err)
	}
	line, err := c.br.ReadSlice('\n')
	if err != nil || len(line) < 12 {
		tb.Fatalf("status line %q: %v", line, err)
	}
	code := int(line[9]-'0')*100 + int(line[10]-'0')*10 + int(line[11]-'0')
	n := 0
	for {
		h, err := c.br.ReadSlice('\n')
		if err != nil {
			tb.Fatal(err)
		}
		if len(h) <= 2 {
			break
		}
		if v, ok := bytes.CutPrefix(h, []byte("Content-Length: ")); ok {
			for _, d := range bytes.TrimRight(v, "\r\n") {
				n = n*10 + int(d-'0')
			}
		}
	}
	if _, err := c.br.Discard(n); err != nil {
		tb.Fatal(err)
	}
	return code
}
