package service_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// A detailed_metric label is made of values the client sends, and /auth
// takes them from request headers, which may hold any byte: a value that
// is not UTF-8 made Prometheus's WithLabelValues panic on every such
// request (after the decision was spent), and a long one became a label
// of its whole size in each series. Labels are valid UTF-8 and at most
// MaxDetailedLabelBytes, distinct values staying distinct.
func TestDetailedMetricLabelsAreValidAndBounded(t *testing.T) {
	rules := mongo(5, config.Second)
	rules.rules[0].entries[0].Value = ""
	rules.rules[0].rl.DetailedMetric = true
	h := start(t, t0, service.Config{Rules: rules})
	long := strings.Repeat("x", 100_000)
	for _, v := range []string{"a\xff\xfeb", long + "1", long + "2"} {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("value %.20q...: panic %v", v, p)
				}
			}()
			if _, err := h.svc.ShouldRateLimit(context.Background(), request("mongo_cps", 0, desc("database", v))); err != nil {
				t.Errorf("value %.20q...: %v", v, err)
			}
		}()
	}
	got := seriesOf(t, h, "sluice_rls_hits_total", "mongo_cps.")
	if len(got) != 3 {
		t.Errorf("%d series, want 3 (distinct values stay distinct): %q", len(got), keys(got))
	}
	for l := range got {
		if !utf8.ValidString(l) || len(l) > service.MaxDetailedLabelBytes {
			t.Errorf("label %.40q... (%d bytes): want valid UTF-8 of at most %d bytes", l, len(l), service.MaxDetailedLabelBytes)
		}
	}
}

func keys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k[:min(len(k), 40)])
	}
	return out
}
