package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/httplimit"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// NewMetrics called twice on one registry is not an error, and the second
// Metrics counts into the series the registry already has.
func TestNewMetricsTwiceSharesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := httplimit.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	m2, err := httplimit.NewMetrics(reg)
	if err != nil {
		t.Fatalf("second NewMetrics: %v", err)
	}
	m := mustNew(t, httplimit.Config{
		Settings: httplimit.Settings{Limiter: newStore(t, clocktest.At(minute0))},
		Policies: []httplimit.Policy{{Name: "p", Limit: sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 5, Period: time.Minute}, Key: httplimit.Global()}},
		Metrics:  m2,
	})
	do(m.Handler(http.HandlerFunc(ok)), httptest.NewRequest("GET", "/", nil))
	if n := decisions(t, reg, "allowed"); n != 1 {
		t.Fatalf("allowed = %v, want 1", n)
	}
}
