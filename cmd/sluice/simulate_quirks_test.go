package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// gcra is token_bucket's other name: naming both gives one row, not two
// identical ones.
func TestSimulateReportsAnAlgorithmNamedTwiceOnce(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"simulate", "-pattern", "boundary", "-algorithms", "gcra,token_bucket"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), "  token_bucket "); n != 1 {
		t.Fatalf("%d token_bucket rows, want 1:\n%s", n, out.String())
	}
}

// A zero or negative contract is refused (exit 2), not read as the
// default (-rate 0 was a silent 100).
func TestSimulateRefusesAContractThatIsNotPositive(t *testing.T) {
	for _, args := range [][]string{
		{"simulate", "-pattern", "boundary", "-rate", "0"},
		{"simulate", "-pattern", "boundary", "-burst", "0"},
		{"simulate", "-pattern", "boundary", "-period", "0s"},
		{"simulate", "-pattern", "boundary", "-rate", "-5"},
		{"simulate", "accuracy", "-rate", "0"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != 2 || !strings.Contains(errb.String(), "must be positive") || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and must be positive", args, code, out.String(), errb.String())
		}
	}
}

// Each chart written is named on stderr with its absolute path, so that a
// run in a container or a script says where to look; stdout stays the
// report.
func TestSimulateSaysWhereItWroteItsCharts(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "c.svg")
	var out, errb bytes.Buffer
	if code := run([]string{"simulate", "-pattern", "boundary", "-json", "-chart", svg}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "chart written to "+svg) {
		t.Errorf("stderr %q does not name %s", errb.String(), svg)
	}
	if strings.Contains(out.String(), "chart") {
		t.Errorf("the chart's line reached stdout, the JSON report: %s", out.String())
	}
}
