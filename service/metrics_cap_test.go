package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// seriesOf returns the label values of counter name whose rule label
// starts with prefix, with their values.
func seriesOf(t *testing.T, h *harness, name, prefix string) map[string]float64 {
	t.Helper()
	return ruleCounters(t, h, name, func(rule string) bool { return strings.HasPrefix(rule, prefix) })
}

// detailed_metric labels series by client-chosen values: their number is
// capped per rule, and the descriptors past the cap are counted in the
// rule's other bucket, so that no hit goes uncounted.
func TestDetailedMetricSeriesAreCapped(t *testing.T) {
	rules := mongo(5, config.Second)
	rules.rules[0].entries[0].Value = ""
	rules.rules[0].rl.DetailedMetric = true
	h := start(t, t0, service.Config{Rules: rules, MaxDetailedSeries: 10})
	for i := range 150 {
		h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, desc("database", fmt.Sprintf("db%d", i))))
	}
	got := seriesOf(t, h, "sluice_rls_hits_total", "mongo_cps.")
	if len(got) != 11 {
		t.Errorf("%d series for one detailed rule, want 10 and the other bucket", len(got))
	}
	var sum float64
	for _, v := range got {
		sum += v
	}
	if sum != 150 {
		t.Errorf("hits over the series = %v, want 150", sum)
	}
	if other := got["mongo_cps.database_users#other"]; other != 140 {
		t.Errorf("other bucket = %v, want 140 (series: %d)", other, len(got))
	}
}
