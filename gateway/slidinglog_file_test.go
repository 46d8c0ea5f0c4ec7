package gateway_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/gateway"
)

// A proxy sliding_log above the per-key cap of entries is refused at its
// algorithm's line with the precision that fits, and loads with it;
// precision is refused on the other algorithms.
func TestProxySlidingLogAboveTheEntryCapNeedsPrecision(t *testing.T) {
	doc := func(rate, extra string) string {
		return "upstream: http://127.0.0.1:1\nlimits:\n  - name: l\n    key: ip\n    rate: " + rate + "\n" + extra
	}
	if _, err := gateway.ParseFile("p.yaml", []byte(doc("131072r/h", "    algorithm: sliding_log\n"))); err != nil {
		t.Fatalf("131072r/h: %v", err)
	}
	_, err := gateway.ParseFile("p.yaml", []byte(doc("131073r/h", "    algorithm: sliding_log\n")))
	if err == nil || !strings.HasPrefix(err.Error(), "p.yaml:6:") || !strings.Contains(err.Error(), "set precision: 27.46603ms or coarser") {
		t.Fatalf("131073r/h: error %v, want one at line 6 naming precision 27.46603ms", err)
	}
	if _, err := gateway.ParseFile("p.yaml", []byte(doc("131073r/h", "    algorithm: sliding_log\n    precision: 27.46603ms\n"))); err != nil {
		t.Fatalf("131073r/h with its precision: %v", err)
	}
	if _, err := gateway.ParseFile("p.yaml", []byte(doc("10r/h", "    algorithm: fixed_window\n    precision: 1s\n"))); err == nil {
		t.Fatal("precision on a fixed_window was accepted")
	}
}
