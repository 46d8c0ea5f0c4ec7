package sluice_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestFailureModeNamesParseBack checks that each failure mode's name
// parses back to it, and that any other name (another case included) is
// refused with an error naming the three.
func TestFailureModeNamesParseBack(t *testing.T) {
	for _, m := range []sluice.FailureMode{sluice.FailOpen, sluice.FailClosed, sluice.FailLocal} {
		got, err := sluice.ParseFailureMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseFailureMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, s := range []string{"", "Open", "deny", "mode(3)"} {
		if _, err := sluice.ParseFailureMode(s); err == nil || !strings.Contains(err.Error(), "want open, closed or local") {
			t.Errorf("ParseFailureMode(%q): error %v, want one naming open, closed and local", s, err)
		}
	}
	if got := sluice.FailureMode(3).String(); got != "mode(3)" {
		t.Errorf("FailureMode(3).String() = %q, want mode(3)", got)
	}
}
