package main

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testlog"
)

// adaptiveProxyCfg holds the adaptive limit at 2: a sheddable request may
// fill floor(2 × 0.7) = 1 of it, a critical one both.
const adaptiveProxyCfg = `
max_in_flight: adaptive
adaptive: {algorithm: aimd, latency_objective: 50ms, initial: 2, min: 2, max: 2, window: 100ms, min_samples: 5}
routes:
  - {name: batch, match: /batch/, priority: sheddable}
  - {name: api, match: /api/, priority: critical}
`

// sluice proxy wires a file's max_in_flight: adaptive and its routes'
// priorities into the gateway and the gateway's limit into its admin
// metrics: -check names the priority, and with one critical request held
// in flight a sheddable one is shed (503, Retry-After, the reason
// max_in_flight) while a critical one still passes, the gauge shows the
// limit and the shed request is counted for its route. How the limit
// follows an overloaded upstream is gateway's to test
// (TestAdaptiveMaxInFlightShedsAnUpstreamPastCapacity).
func TestProxyAdaptiveMaxInFlight(t *testing.T) {
	t.Parallel() // waits on processes; touches no process-wide state
	upURL, entered, release := holdingUpstream(t, "/api/hold", 0)
	defer release()
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	writeFile(t, cfg, adaptiveProxyCfg)
	var out, errb testlog.Buffer
	if code := runProxy(context.Background(), []string{"-check", "-config", cfg, "-upstream", upURL}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "priority sheddable") {
		t.Fatalf("-check: exit %d, output %q, stderr %q", code, out.String(), errb.String())
	}
	p := launchProxy(t, "-config", cfg, "-upstream", upURL, "-access-log", "off")
	held := make(chan string, 1)
	go func() {
		resp, err := http.Get(p.url + "/api/hold")
		if err != nil {
			held <- err.Error()
			return
		}
		resp.Body.Close()
		held <- resp.Status
	}()
	<-entered
	shed, _ := call(t, http.MethodGet, p.url+"/batch/x", "", nil)
	if shed.StatusCode != http.StatusServiceUnavailable || shed.Header.Get("Retry-After") == "" ||
		shed.Header.Get("Sluice-Rate-Limited-Reason") != "max_in_flight" {
		t.Errorf("sheddable request with the limit's share full: %s, Retry-After %q, reason %q; want 503, a Retry-After and max_in_flight",
			shed.Status, shed.Header.Get("Retry-After"), shed.Header.Get("Sluice-Rate-Limited-Reason"))
	}
	if code := getStatus(t, p.url+"/api/x"); code != http.StatusOK {
		t.Errorf("critical request with one of 2 in flight: %d, want 200", code)
	}
	release()
	if got := <-held; got != "200 OK" {
		t.Errorf("held request: %s, want 200 OK", got)
	}
	_, b := call(t, http.MethodGet, p.admin+"/metrics", "", nil)
	if !regexp.MustCompile(`(?m)^sluice_http_adaptive_limit\{policy="max_in_flight"\} 2$`).Match(b) {
		t.Errorf("want sluice_http_adaptive_limit{policy=\"max_in_flight\"} 2 in the metrics:\n%s", b)
	}
	if !strings.Contains(string(b), `sluice_proxy_requests_total{outcome="shed",route="batch"} 1`) {
		t.Errorf("want the one shed request counted for the batch route:\n%s", b)
	}
}
