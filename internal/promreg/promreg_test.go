package promreg_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sluicehq/sluice/internal/promreg"
)

func newCounter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
}

// A second registration returns the first collector; a conflicting one is
// an error.
func TestRegisterReusesExisting(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := promreg.Register(reg, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	b, err := promreg.Register(reg, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	b.Inc()
	if got := testutil.ToFloat64(a); got != 1 {
		t.Fatalf("first counter = %v, want 1 (the second registration counts into it)", got)
	}
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "different"})
	if _, err := promreg.Register(reg, other); err == nil {
		t.Fatal("a conflicting collector was accepted")
	}
}
