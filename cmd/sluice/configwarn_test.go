package main

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/testlog"
)

// A config with many warnings (a file, or an Envoy Gateway resource, of
// many descriptors carrying a flag that changes nothing) logs at most
// maxWarningLines of them per load and one line counting the rest, so that
// each reload or xDS update cannot write a line per descriptor.
func TestConfigWarningsAreLoggedUpToABound(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: many\ndescriptors:\n")
	for i := range 50 {
		fmt.Fprintf(&b, "  - key: k%d\n    shadow_mode: true\n    descriptors:\n      - key: user\n        rate_limit: {unit: second, requests_per_unit: 1}\n", i)
	}
	d, err := config.Parse("many.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Warnings) != 50 {
		t.Fatalf("%d warnings, want 50", len(d.Warnings))
	}
	var logs testlog.Buffer
	logConfigWarnings(slog.New(slog.NewTextHandler(&logs, nil)), d.Warnings)
	out := logs.String()
	if n := strings.Count(out, "\n"); n != maxWarningLines+1 {
		t.Errorf("%d log lines for 50 warnings, want %d and one counting the rest:\n%s", n, maxWarningLines+1, out)
	}
	if !strings.Contains(out, "more=40") {
		t.Errorf("no line counting the 40 warnings not logged:\n%s", out)
	}
}
