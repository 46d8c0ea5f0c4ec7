// Package promtest reads the Prometheus series a test's registry holds:
// the one reader of a counter's or a gauge's value for the tests of every
// package that counts.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package promtest

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value returns the value of the counter or gauge name in reg whose label
// is value, or of its one series when label is ""; a gather error or no
// such series fails the test.
func Value(t testing.TB, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" && len(mf.GetMetric()) == 1 || hasLabel(m, label, value) {
				if mf.GetType() == dto.MetricType_COUNTER {
					return m.GetCounter().GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s=%q}", name, label, value)
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	return slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
		return l.GetName() == name && l.GetValue() == value
	})
}
