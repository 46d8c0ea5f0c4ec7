package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testlog"
)

const adaptiveProxyCfg = `
max_in_flight: adaptive
adaptive: {algorithm: aimd, latency_objective: 50ms, initial: 40, min: 2, max: 100, window: 100ms, min_samples: 5}
routes:
  - {name: batch, match: /batch/, priority: sheddable}
  - {name: api, match: /api/, priority: critical}
`

// A real sluice proxy with max_in_flight: adaptive in front of an upstream
// of 4 workers of 20 ms, sent 40 requests at once: the excess is shed with
// 503, Retry-After and the reason max_in_flight, the sheddable route's
// first, and the admin endpoint's gauge shows the limit fallen from 40.
func TestProxyAdaptiveMaxInFlight(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	sem := make(chan struct{}, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sem <- struct{}{}
		time.Sleep(20 * time.Millisecond)
		<-sem
		io.WriteString(w, "ok")
	}))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(cfg, []byte(adaptiveProxyCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb testlog.Buffer
	if code := runProxy(context.Background(), []string{"-check", "-config", cfg, "-upstream", up.URL}, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "priority sheddable") {
		t.Fatalf("-check: exit %d, output %q, stderr %q", code, out.String(), errb.String())
	}
	p := launchProxy(t, "-config", cfg, "-upstream", up.URL, "-access-log", "off")
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	served, shed := map[string]int{}, map[string]int{}
	var bad []string
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for i := range 40 {
		path := []string{"/batch/x", "/api/x"}[i%2]
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := client.Get(p.url + path)
				if err != nil {
					mu.Lock()
					bad = append(bad, err.Error())
					mu.Unlock()
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				switch {
				case resp.StatusCode == http.StatusOK:
					served[path]++
				case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" &&
					resp.Header.Get("Sluice-Rate-Limited-Reason") == "max_in_flight":
					shed[path]++
				default:
					bad = append(bad, resp.Status+" "+resp.Header.Get("Retry-After")+" "+resp.Header.Get("Sluice-Rate-Limited-Reason"))
				}
				mu.Unlock()
				if resp.StatusCode != http.StatusOK {
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("served %v, shed %v", served, shed)
	if len(bad) > 0 {
		t.Fatalf("%d bad answers, first %q", len(bad), bad[0])
	}
	rate := func(p string) float64 { return float64(shed[p]) / float64(shed[p]+served[p]) }
	if !(rate("/batch/x") > rate("/api/x")) || served["/api/x"] == 0 {
		t.Errorf("refused: batch (sheddable) %.2f, api (critical) %.2f; want sheddable refused first", rate("/batch/x"), rate("/api/x"))
	}
	_, b := call(t, http.MethodGet, p.admin+"/metrics", "", nil)
	m := regexp.MustCompile(`(?m)^sluice_http_adaptive_limit\{policy="max_in_flight"\} (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no sluice_http_adaptive_limit in the metrics:\n%s", b)
	}
	if limit, _ := strconv.ParseFloat(string(m[1]), 64); limit > 20 {
		t.Errorf("sluice_http_adaptive_limit %v, want it fallen by half from 40 towards the upstream's 4 workers", limit)
	}
	if !strings.Contains(string(b), `sluice_proxy_requests_total{outcome="shed",route="batch"}`) {
		t.Errorf("no shed requests counted for the batch route")
	}
}
