package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/promtest"
	"github.com/sluicehq/sluice/rlheader"
)

// An upstream on loopback with 4 workers of 20 ms each, sent 40 requests
// at once through a proxy file's max_in_flight: adaptive: the limit falls
// from 40 towards the upstream's 4 workers, the excess is shed with 503,
// Retry-After and the reason header naming the limit, the sheddable
// route's requests first, and sluice_http_adaptive_limit shows the limit.
func TestAdaptiveMaxInFlightShedsAnUpstreamPastCapacity(t *testing.T) {
	up := newUpstream(t)
	sem := make(chan struct{}, 4)
	up.set(func(w http.ResponseWriter, r *http.Request) {
		sem <- struct{}{}
		time.Sleep(20 * time.Millisecond)
		<-sem
		io.WriteString(w, "ok")
	})
	f, err := gateway.ParseFile("proxy.yaml", []byte(`
upstreams:
  - name: app
    url: `+up.URL+`
    max_in_flight: adaptive
    adaptive: {algorithm: aimd, latency_objective: 50ms, initial: 40, min: 2, max: 100, window: 100ms, min_samples: 5}
routes:
  - {name: batch, match: /batch/, priority: sheddable}
  - {name: api, match: /api/, priority: critical}
`))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if f.Config.Limits, err = httplimit.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	_, srv := front(t, f.Config)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()

	var mu sync.Mutex
	served, shed := map[string]int{}, map[string]int{}
	var bad []string
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for i := range 40 {
		path := "/api/x"
		if i%2 == 0 {
			path = "/batch/x"
		}
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := client.Get(srv.URL + path)
				if err != nil {
					mu.Lock()
					bad = append(bad, err.Error())
					mu.Unlock()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch resp.StatusCode {
				case http.StatusOK:
					served[path]++
				case http.StatusServiceUnavailable:
					shed[path]++
					if resp.Header.Get("Retry-After") == "" || resp.Header.Get(rlheader.HeaderReason) != "max_in_flight:app" {
						bad = append(bad, "a 503 without Retry-After or the reason: "+resp.Header.Get(rlheader.HeaderReason))
					}
				default:
					bad = append(bad, resp.Status)
				}
				mu.Unlock()
				if resp.StatusCode != http.StatusOK {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	limit := promtest.Value(t, reg, "sluice_http_adaptive_limit", "policy", "max_in_flight:app")
	t.Logf("limit %v; served %v; shed %v", limit, served, shed)
	if len(bad) > 0 {
		t.Fatalf("%d bad answers, first %s", len(bad), bad[0])
	}
	if limit > 20 {
		t.Errorf("sluice_http_adaptive_limit = %v, want it fallen by half from 40 towards the upstream's 4 workers", limit)
	}
	rate := func(p string) float64 { return float64(shed[p]) / float64(shed[p]+served[p]) }
	if !(rate("/batch/x") > rate("/api/x")) {
		t.Errorf("refused: batch (sheddable) %.2f, api (critical) %.2f; want the sheddable route refused first", rate("/batch/x"), rate("/api/x"))
	}
	if served["/api/x"] == 0 {
		t.Error("no critical request served")
	}
}

// The priority header sets a request's priority from a trusted proxy,
// and from any other client only lowers it below its route's: with the
// limit full for sheddable requests, a critical route's request marked
// sheddable is shed, and a default one marked critical is not raised.
func TestAdaptivePriorityHeaderOnlyLowersFromUntrustedClients(t *testing.T) {
	up := newUpstream(t)
	entered, release := up.hold("/hold")
	cfg := gateway.Config{
		Upstreams: []gateway.Upstream{{Name: "app", URL: mustURL(t, up.URL), Adaptive: &gateway.Adaptive{
			Limiter:        adaptive.Config{Initial: 2, Max: 2, SheddableShare: 0.5, DefaultShare: 0.5},
			PriorityHeader: "X-Priority",
		}}},
		Routes: []gateway.Route{
			{Name: "hold", Patterns: []string{"/hold"}},
			{Name: "vip", Patterns: []string{"/vip"}, Priority: adaptive.Critical},
			{Name: "plain", Patterns: []string{"/plain"}},
		},
	}
	_, srv := front(t, cfg)
	defer holdOne(srv, "/hold", release)()
	<-entered // one in flight: default and sheddable (share 1 of 2) are full
	for _, c := range []struct {
		path, prio string
		want       int
	}{
		{"/vip", "sheddable", http.StatusServiceUnavailable},
		{"/plain", "critical", http.StatusServiceUnavailable},
		{"/vip", "", http.StatusOK},
	} {
		resp := getHeaders(t, srv.Client(), srv.URL+c.path, "X-Priority", c.prio)
		if resp.StatusCode != c.want {
			t.Errorf("%s with X-Priority %q: %d, want %d", c.path, c.prio, resp.StatusCode, c.want)
		}
	}
}

func TestAdaptiveFileErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"upstreams: [{name: a, url: 'http://x', adaptive: {min: 2}}]", "need max_in_flight: adaptive"},
		{"upstreams: [{name: a, url: 'http://x', max_in_flight: lots}]", `max_in_flight "lots"`},
		{"max_in_flight: adaptive\nadaptive: {algorithm: vegas}", "want gradient, gradient2 or aimd"},
		{"max_in_flight: adaptive\nadaptive: {latency_objective: 10ms}", "latency_objective is aimd's"},
		{"max_in_flight: adaptive\nadaptive: {min: 10, max: 5}", "above max"},
		{"max_in_flight: adaptive\nadaptive: {algorithm: aimd, probe_interval: 1m}", "probe_interval is gradient's"},
		{"max_in_flight: adaptive\nadaptive: {floor: 3}", "floor"},
		{"max_in_flight: adaptive\nadaptive: {priority_header: 'X Priority'}", "priority_header"},
		{"max_in_flight: adaptive\nadaptive: {priority_header: ''}", "priority_header"},
		{"upstream: 'http://x'\nroutes: [{name: r, match: /, priority: sheddable}]", "would act on nothing"},
		{"max_in_flight: adaptive\nupstream: 'http://x'\nroutes: [{name: r, match: /, priority: urgent}]", `priority "urgent"`},
	} {
		_, err := gateway.ParseFile("proxy.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.yaml, err, c.want)
		}
	}
}

// Update keeps an upstream's adaptive limiter, and what it has learned and
// holds in flight, while its settings stay the same, and starts a new one
// when they change.
func TestAdaptiveLimiterKeptAcrossUpdate(t *testing.T) {
	up := newUpstream(t)
	entered, release := up.hold("/hold")
	reg := prometheus.NewRegistry()
	limits, err := httplimit.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := func(max int) gateway.Config {
		return gateway.Config{
			Upstreams: []gateway.Upstream{{Name: "app", URL: mustURL(t, up.URL), Adaptive: &gateway.Adaptive{Limiter: adaptive.Config{Max: max}}}},
			Limits:    limits, Settings: httplimit.Settings{Logger: quiet},
		}
	}
	g, srv := front(t, cfg(50))
	defer holdOne(srv, "/hold", release)()
	<-entered
	inFlight := func() float64 {
		return promtest.Value(t, reg, "sluice_http_adaptive_in_flight", "policy", "max_in_flight:app")
	}
	if err := g.Update(cfg(50)); err != nil {
		t.Fatal(err)
	}
	if n := inFlight(); n != 1 {
		t.Errorf("after an Update with the same settings: %v in flight, want the held request (1)", n)
	}
	if err := g.Update(cfg(60)); err != nil {
		t.Fatal(err)
	}
	if n := inFlight(); n != 0 {
		t.Errorf("after an Update with a new max: %v in flight, want a new limiter (0)", n)
	}
}

// New refuses an Adaptive whose PriorityHeader is no header name, global
// or an upstream's, as the file does: no request would carry it.
func TestAdaptivePriorityHeaderMustBeAHeaderName(t *testing.T) {
	bad := &gateway.Adaptive{PriorityHeader: "X Priority"}
	for name, cfg := range map[string]gateway.Config{
		"global":   {Upstreams: []gateway.Upstream{{Name: "app", URL: mustURL(t, "http://127.0.0.1:1")}}, Adaptive: bad, Settings: httplimit.Settings{Logger: quiet}},
		"upstream": {Upstreams: []gateway.Upstream{{Name: "app", URL: mustURL(t, "http://127.0.0.1:1"), Adaptive: bad}}, Settings: httplimit.Settings{Logger: quiet}},
	} {
		g, err := gateway.New(cfg)
		if err == nil {
			g.Close()
			t.Errorf("%s: New accepted PriorityHeader %q", name, bad.PriorityHeader)
		} else if !strings.Contains(err.Error(), "priority header") {
			t.Errorf("%s: error %v, want one about the priority header", name, err)
		}
	}
}

// holdOne sends a GET of path to srv in the background, for an upstream
// that holds it until release is closed; the func it returns closes
// release and waits for the request to end.
func holdOne(srv *httptest.Server, path string, release chan struct{}) func() {
	held := make(chan struct{})
	go func() {
		defer close(held)
		if resp, err := srv.Client().Get(srv.URL + path); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	return func() { close(release); <-held }
}
