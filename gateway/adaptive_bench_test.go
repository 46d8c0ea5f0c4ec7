package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// BenchmarkGatewayMaxInFlight is one request through the gateway's
// handler to a real upstream on loopback, with no in-flight limit, a fixed
// max_in_flight and max_in_flight: adaptive (never full), to show what
// the adaptive limit adds to the proxy's own cost.
func BenchmarkGatewayMaxInFlight(b *testing.B) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	b.Cleanup(up.Close)
	for _, bc := range []struct{ name, yaml string }{
		{"none", ""},
		{"fixed", "max_in_flight: 100000"},
		{"adaptive", "max_in_flight: adaptive\nadaptive: {initial: 100000, max: 100000}"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f, err := gateway.ParseFile("b.yaml", []byte("upstream: "+up.URL+"\n"+bc.yaml+"\n"))
			if err != nil {
				b.Fatal(err)
			}
			cfg := f.Config
			cfg.Logger = quiet
			g, err := gateway.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			b.ReportAllocs()
			for b.Loop() {
				if w := served(g, "GET", "/x"); w.Code != 200 {
					b.Fatalf("status %d", w.Code)
				}
			}
		})
	}
}
