package promtest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/promtest"
)

// TestValueReadsACounterOrAGaugeBySeries checks that Value reads a
// counter's series by its label, and a gauge's one series without one.
func TestValueReadsACounterOrAGaugeBySeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total"}, []string{"outcome"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	reg.MustRegister(c, g)
	c.WithLabelValues("ok").Add(3)
	c.WithLabelValues("refused").Add(5)
	g.Set(7)
	if got := promtest.Value(t, reg, "c_total", "outcome", "refused"); got != 5 {
		t.Errorf("c_total{outcome=refused} = %v, want 5", got)
	}
	if got := promtest.Value(t, reg, "g", "", ""); got != 7 {
		t.Errorf("g = %v, want 7", got)
	}
}
