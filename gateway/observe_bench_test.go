package gateway_test

import (
	"testing"

	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
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
				var edit func(*gateway.Config)
				if obs == "page" {
					pg := page.New(page.Config{})
					b.Cleanup(pg.Close) // after the gateway's
					edit = func(c *gateway.Config) { c.Observer = pageObserver{pg} }
				}
				g := gatewayOf(b, `
limits: [{name: l, key: ip, rate: `+bc.rate+`}]
routes: [{name: api, match: /api/, limits: [l]}]
`, "http://upstream.invalid", canned{}, edit)
				if bc.code == 429 { // spend the one request of the day
					served(g, "GET", "/api/x")
				}
				b.ReportAllocs()
				for b.Loop() {
					if w := served(g, "GET", "/api/x"); w.Code != bc.code {
						b.Fatalf("status %d, want %d", w.Code, bc.code)
					}
				}
			})
		}
	}
}
