package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/memstore"
)

// BenchmarkGateway is one request through the gateway's handler to a real
// upstream on loopback, with one rate limit on the route (admitted): the
// proxy's own cost plus the upstream round trip, client side excluded.
func BenchmarkGateway(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	defer up.Close()
	f, err := gateway.ParseFile("b.yaml", []byte(`
limits: [{name: l, key: ip, rate: 1000000000r/s, burst: 1000000, nodelay: true}]
routes: [{name: all, match: /, limits: [l]}]
`))
	if err != nil {
		b.Fatal(err)
	}
	store := memstore.New(memstore.Config{})
	defer store.Close()
	cfg := f.Config
	cfg.Upstreams = []gateway.Upstream{{Name: "u", URL: mustURL(b, up.URL)}}
	cfg.Limiter = store
	cfg.Logger = quiet
	g, err := gateway.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := httptest.NewRequest("GET", "/x", nil)
			r.RemoteAddr = "192.0.2.1:1234"
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			if w.Code != 200 {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
}
