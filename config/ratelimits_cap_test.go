package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
)

// listDoc is a domain whose one descriptor has a rate_limits list of n
// limits, each of its own period.
func listDoc(n int) string {
	var b strings.Builder
	b.WriteString("domain: api\ndescriptors:\n  - key: user\n    rate_limits:\n")
	for i := range n {
		fmt.Fprintf(&b, "      - {unit: second, unit_multiplier: %d, requests_per_unit: 10}\n", i+1)
	}
	return b.String()
}

// A rate_limits list is capped at config.MaxListLimits: every request on
// the descriptor spends on each limit, and the load checks each pair, so
// a longer list is refused at its line, not served.
func TestRateLimitsListOverTheCapIsRefused(t *testing.T) {
	if _, err := config.Parse("rules.yaml", []byte(listDoc(config.MaxListLimits))); err != nil {
		t.Fatalf("a list of %d limits: %v", config.MaxListLimits, err)
	}
	_, err := config.Parse("rules.yaml", []byte(listDoc(config.MaxListLimits+1)))
	if err == nil {
		t.Fatalf("a list of %d limits was accepted", config.MaxListLimits+1)
	}
	want := fmt.Sprintf("rules.yaml:5:7: config: %d limits in rate_limits, over the limit of %d", config.MaxListLimits+1, config.MaxListLimits)
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start %q", err, want)
	}
}
