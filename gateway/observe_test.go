package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/httplimit/httplimittest"
)

// holding is an upstream that holds each request until release closes.
type holding struct {
	entered chan struct{}
	release chan struct{}
}

func (h holding) RoundTrip(r *http.Request) (*http.Response, error) {
	h.entered <- struct{}{}
	<-h.release
	return canned{}.RoundTrip(r)
}

// shedWhileHeld sends g a GET of /api/x, which up holds, and a second
// one while the first is held; once up has let the first go, it returns
// both statuses.
func shedWhileHeld(g http.Handler, up holding) (second, first int) {
	done := make(chan int)
	go func() { done <- served(g, "GET", "/api/x").Code }()
	<-up.entered
	second = served(g, "GET", "/api/x").Code
	close(up.release)
	return second, <-done
}

// adaptiveGateway is a gateway whose one route, api (/api/), goes to an
// upstream u of adaptive max_in_flight held at 1, through up, with edit
// applied to its config.
func adaptiveGateway(tb testing.TB, up holding, edit func(*gateway.Config)) http.Handler {
	tb.Helper()
	f, err := gateway.ParseFile("o.yaml", []byte(`
upstreams:
  - {name: u, url: "http://upstream.invalid", max_in_flight: adaptive, adaptive: {initial: 1, min: 1, max: 1}}
routes: [{name: api, match: /api/}]
`))
	if err != nil {
		tb.Fatal(err)
	}
	cfg := f.Config
	cfg.Transport = up
	edit(&cfg)
	return newGateway(tb, cfg)
}

// The gateway hands its observer the routes' decisions and the requests
// it sheds itself: a request beyond max_in_flight is policy "shed:" and
// the upstream, keyed by the route; and Peek reads a key's state under a
// policy without spending, by the key a request would have.
func TestGatewayObservesShedsAndPeeks(t *testing.T) {
	up := holding{entered: make(chan struct{}, 1), release: make(chan struct{})}
	obs := &httplimittest.Recorder[httplimit.Decision]{}
	g := gatewayOf(t, `
limits: [{name: per_ip, key: ip, rate: 3r/m, algorithm: fixed_window}]
routes: [{name: api, match: /api/, limits: [per_ip]}]
`, "http://upstream.invalid", up, func(c *gateway.Config) { c.Upstreams[0].MaxInFlight, c.Observer = 1, obs })
	if second, first := shedWhileHeld(g, up); second != http.StatusServiceUnavailable {
		t.Fatalf("a request beyond max_in_flight: %d, want 503", second)
	} else if first != 200 {
		t.Fatalf("the first request: %d", first)
	}
	got := obs.Decisions()
	shed := httplimit.Decision{Policy: "shed:u", Outcome: httplimit.Limited, Cost: 1, Key: "api"}
	if len(got) != 3 || got[2] != shed || got[0].Policy != "per_ip" || got[0].Outcome != httplimit.Allowed {
		t.Fatalf("observed %+v, want per_ip allowed twice, then %+v", got, shed)
	}

	for range 2 { // two spent: 1 remains, however often it is read
		ps, err := g.Peek(context.Background(), "per_ip", "192.0.2.1")
		if err != nil || ps.Result.Remaining != 1 || !ps.Result.Allowed || ps.Key != "per_ip:192.0.2.1" || ps.Route != "api" {
			t.Fatalf("Peek: %+v, %v; want 1 remaining of per_ip:192.0.2.1", ps, err)
		}
	}
	if _, err := g.Peek(context.Background(), "nope", "x"); !errors.Is(err, gateway.ErrNoPolicy) {
		t.Errorf("Peek of an unknown policy: %v, want ErrNoPolicy", err)
	}
}

// A request an adaptive max_in_flight sheds is observed keyed by its
// route, as the gateway's other sheds are, not by an empty key.
func TestGatewayObservesAdaptiveShedByRoute(t *testing.T) {
	up := holding{entered: make(chan struct{}, 1), release: make(chan struct{})}
	obs := &httplimittest.Recorder[httplimit.Decision]{}
	g := adaptiveGateway(t, up, func(c *gateway.Config) { c.Observer = obs })
	if second, _ := shedWhileHeld(g, up); second != http.StatusServiceUnavailable {
		t.Fatalf("a request beyond the adaptive limit: %d, want 503", second)
	}
	if ds := obs.Decisions(); len(ds) != 1 || ds[0].Key != "api" || ds[0].Outcome != httplimit.Limited || ds[0].Policy != gateway.UpstreamAdaptiveName("u") {
		t.Errorf("observed %+v, want one refusal by %s keyed api", ds, gateway.UpstreamAdaptiveName("u"))
	}
}
