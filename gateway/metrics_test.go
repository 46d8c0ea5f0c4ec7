package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/gateway"
)

// NewMetrics called twice on one registry (a program that builds its
// metrics again, as on a restart of a component) returns metrics that count
// into the series already registered, rather than into collectors that no
// registry reads.
func TestNewMetricsTwiceSharesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := gateway.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	m2, err := gateway.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	up := newUpstream(t)
	cfg := direct(t, up)
	cfg.Metrics = m2
	_, srv := front(t, cfg)
	if code := get(t, srv.Client(), srv.URL+"/x").StatusCode; code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	want := `
# HELP sluice_proxy_requests_total Requests by route and outcome.
# TYPE sluice_proxy_requests_total counter
sluice_proxy_requests_total{outcome="forwarded",route="-"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sluice_proxy_requests_total"); err != nil {
		t.Fatal(err)
	}
}
