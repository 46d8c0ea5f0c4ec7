package gateway_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/memstore"
)

// benchGateway is a gateway in front of a real upstream on loopback, with
// one rate limit on every route that admits all the benchmark sends; all
// is closed when b ends.
func benchGateway(b *testing.B) *gateway.Gateway {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	b.Cleanup(up.Close)
	return gatewayOf(b, `
limits: [{name: l, key: ip, rate: 1000000000r/s, burst: 1000000, nodelay: true}]
routes: [{name: all, match: /, limits: [l]}]
`, up.URL, nil, nil)
}

// BenchmarkGateway is one request through the gateway's handler to a real
// upstream on loopback, with one rate limit on the route (admitted): the
// proxy's own cost plus the upstream round trip, client side excluded.
func BenchmarkGateway(b *testing.B) {
	g := benchGateway(b)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if w := served(g, "GET", "/x"); w.Code != 200 {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
}

// BenchmarkGatewayServer is one keep-alive request through a real
// http.Server in front of the gateway (so that the per-request deadlines
// the gateway sets reach a real connection) to a real upstream: the
// client's, the proxy's and the upstream's cost together.
func BenchmarkGatewayServer(b *testing.B) {
	g := benchGateway(b)
	srv := httptest.NewServer(g)
	defer srv.Close()
	for _, method := range []string{"GET", "POST"} {
		b.Run(method, func(b *testing.B) {
			c := srv.Client()
			b.ReportAllocs()
			for b.Loop() {
				var body io.Reader
				if method == "POST" {
					body = strings.NewReader(`{"a":1}`)
				}
				req, err := http.NewRequest(method, srv.URL+"/x", body)
				if err != nil {
					b.Fatal(err)
				}
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	}
}

// canned is an upstream answered in process: what is measured is the
// proxy's own work, without a network round trip.
type canned struct{}

func (canned) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Length": {"3"}}, ContentLength: 3,
		Body: io.NopCloser(strings.NewReader("ok\n")), Request: r,
	}, nil
}

// BenchmarkGatewayRouting is the proxy's CPU per request with the upstream
// answered in process: routing (canonical form, ServeMux), one rate limit
// admitted, forwarding. Sub-benchmarks: a request already in canonical
// form, and one spelled otherwise (lower-case method, escapes, slashes,
// host case and port).
func BenchmarkGatewayRouting(b *testing.B) {
	g := gatewayOf(b, `
limits: [{name: l, key: ip, rate: 1000000000r/s, burst: 1000000, nodelay: true}]
routes:
  - {name: api, match: /api/, limits: [l]}
  - {name: login, match: "POST /login", limits: [l]}
`, "http://upstream.invalid", canned{}, nil)
	for _, bc := range []struct{ name, method, target, host string }{
		{"canonical", "GET", "/api/users/42", "api.example.com"},
		{"spelled", "post", "//%6Cogin/", "API.example.com.:8080"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(bc.method, bc.target, nil)
				r.Host = bc.host
				r.RemoteAddr = "192.0.2.1:1234"
				w := httptest.NewRecorder()
				g.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}

// manyRoutes is a proxy file of n routes, one limit each, whose patterns
// take the forms the docs list in turn: a subtree, a path with a {name}
// segment, one with {name...}, an exact path ({$}), a method and a host.
func manyRoutes(n int) string {
	var b strings.Builder
	b.WriteString("upstream: http://127.0.0.1:9\nlimits: [{name: l, key: ip, rate: 10r/s}]\nroutes:\n")
	for i := range n {
		var pat string
		switch i % 5 {
		case 0:
			pat = "/svc%d/"
		case 1:
			pat = "/users%d/{id}"
		case 2:
			pat = "/files%d/{path...}"
		case 3:
			pat = "GET /exact%d/{$}"
		default:
			pat = "api%d.example.com/"
		}
		fmt.Fprintf(&b, "  - {name: r%d, match: %q, limits: [l]}\n", i, fmt.Sprintf(pat, i))
	}
	return b.String()
}

// BenchmarkLoadRoutes is what a start or a reload of sluice proxy does
// with a file of N routes: parse it, then build the Gateway that serves
// it.
func BenchmarkLoadRoutes(b *testing.B) {
	for _, n := range []int{1000, 4000, 10000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			data := []byte(manyRoutes(n))
			store := memstore.New(memstore.Config{SweepInterval: -1})
			defer store.Close()
			for b.Loop() {
				f, err := gateway.ParseFile("proxy.yaml", data)
				if err != nil {
					b.Fatal(err)
				}
				f.Config.Limiter = store
				f.Config.Logger = slog.New(slog.DiscardHandler)
				g, err := gateway.New(f.Config)
				if err != nil {
					b.Fatal(err)
				}
				g.Close()
			}
		})
	}
}

// BenchmarkGatewayReadsResponse is BenchmarkGateway on a route whose limit
// counts responses (a reservation, its give-back, and the upstream request
// kept going should the client leave): what reading the response costs.
func BenchmarkGatewayReadsResponse(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	b.Cleanup(up.Close)
	g := gatewayOf(b, `
limits: [{name: l, key: ip, rate: 1000000r/s, burst: 1000000, algorithm: token_bucket, count_responses: [401]}]
routes: [{name: all, match: /, limits: [l]}]
`, up.URL, nil, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if w := served(g, "GET", "/x"); w.Code != 200 {
				b.Fatalf("status %d: %v %s", w.Code, w.Header(), w.Body)
			}
		}
	})
}
