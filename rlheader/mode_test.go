package rlheader_test

import (
	"testing"

	"github.com/sluicehq/sluice/rlheader"
)

// TestModeNamesParseBack checks that each header mode a name can set
// parses back from its name, in any case, and that another name is
// refused.
func TestModeNamesParseBack(t *testing.T) {
	for _, m := range []rlheader.Mode{rlheader.Off, rlheader.Legacy, rlheader.Draft11} {
		if got, err := rlheader.ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for s, want := range map[string]rlheader.Mode{"": rlheader.Off, "LEGACY": rlheader.Legacy, "draft11": rlheader.Draft11} {
		if got, err := rlheader.ParseMode(s); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if got := (rlheader.Legacy | rlheader.Draft11).String(); got != "legacy+draft-11" {
		t.Errorf("Legacy|Draft11 is %q, want legacy+draft-11", got)
	}
	if _, err := rlheader.ParseMode("draft-03"); err == nil {
		t.Error("ParseMode(draft-03) succeeded, want an error")
	}
}
