package main

import (
	"os"
	"path/filepath"
	"testing"
)

// `sluice simulate overload` prints the comparison of fixed and adaptive
// limits, writes its chart, and refuses a scenario it cannot run.
func TestSimulateOverload(t *testing.T) {
	t.Parallel() // waits on processes and timers; touches no process-wide state
	png := filepath.Join(t.TempDir(), "overload.png")
	for _, tt := range []runCase{
		{[]string{"simulate", "overload", "-duration", "5s", "-warmup", "1s", "-chart", png}, 0, "adaptive gradient", ""},
		{[]string{"simulate", "overload", "-duration", "5s", "-warmup", "1s", "-fixed-high", "300", "-json"}, 0, `"name": "fixed 300"`, ""},
		{[]string{"simulate", "overload", "-load", "0.5", "-warmup", "2m"}, 1, "", "warmup"},
		{[]string{"simulate", "overload", "-h"}, 0, "-fixed-low", ""},
	} {
		tt.check(t)
	}
	if fi, err := os.Stat(png); err != nil || fi.Size() == 0 {
		t.Errorf("chart %s not written: %v", png, err)
	}
}
