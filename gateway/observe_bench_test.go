package gateway_test

import (
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/memstore"
	"github.com/sluicehq/sluice/service"
)

// pageObserver hands the gateway's decisions to the live page, as sluice
// proxy does.
type pageObserver struct{ p *page.Page }

func (o pageObserver) Observe(d httplimit.Decision) {
	o.p.Observe(service.Decision{Domain: "proxy", Rule: d.Policy, Outcome: service.Outcome(d.Outcome), Cost: uint64(d.Cost), Key: d.Key})
}

// BenchmarkGatewayObserver is the proxy's CPU and allocations per request
// (upstream answered in process) without an observer and with the live
// page observing, for a request its limit admits and one it refuses.
func BenchmarkGatewayObserver(b *testing.B) {
	for _, bc := range []struct {
		name, rate string
		code       int
	}{
		{"admitted", "1000000000r/s, burst: 1000000, nodelay: true", 200},
		{"refused", "1r/d, algorithm: fixed_window", 429},
	} {
		for _, obs := range []string{"off", "page"} {
			b.Run(bc.name+"/"+obs, func(b *testing.B) {
				f, err := gateway.ParseFile("b.yaml", []byte(`
limits: [{name: l, key: ip, rate: `+bc.rate+`}]
routes: [{name: api, match: /api/, limits: [l]}]
`))
				if err != nil {
					b.Fatal(err)
				}
				store := memstore.New(memstore.Config{})
				defer store.Close()
				cfg := f.Config
				cfg.Upstreams = []gateway.Upstream{{Name: "u", URL: mustURL(b, "http://upstream.invalid")}}
				cfg.Limiter, cfg.Logger, cfg.Transport = store, quiet, canned{}
				if obs == "page" {
					pg := page.New(page.Config{})
					defer pg.Close()
					cfg.Observer = pageObserver{pg}
				}
				g, err := gateway.New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer g.Close()
				if bc.code == 429 { // spend the one request of the day
					r := httptest.NewRequest("GET", "/api/x", nil)
					r.RemoteAddr = "192.0.2.1:1234"
					g.ServeHTTP(httptest.NewRecorder(), r)
				}
				b.ReportAllocs()
				for b.Loop() {
					r := httptest.NewRequest("GET", "/api/x", nil)
					r.RemoteAddr = "192.0.2.1:1234"
					w := httptest.NewRecorder()
					g.ServeHTTP(w, r)
					if w.Code != bc.code {
						b.Fatalf("status %d, want %d", w.Code, bc.code)
					}
				}
			})
		}
	}
}
