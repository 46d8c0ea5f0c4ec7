package rlheader_test

import (
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/rlheader"
)

// TestModeNamesParseBack checks that each header mode a name can set
// parses back from its name, in any case, and that another name is
// refused.
func TestModeNamesParseBack(t *testing.T) {
	for _, m := range []rlheader.Mode{rlheader.Off, rlheader.Legacy, rlheader.Draft11, rlheader.Both} {
		if got, err := rlheader.ParseMode(m.String()); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for s, want := range map[string]rlheader.Mode{"": rlheader.Default, "LEGACY": rlheader.Legacy, "draft11": rlheader.Draft11, "Both": rlheader.Both} {
		if got, err := rlheader.ParseMode(s); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"draft-03", "legacy+draft-11", "default", "3"} {
		if _, err := rlheader.ParseMode(s); err == nil {
			t.Errorf("ParseMode(%q) succeeded, want an error", s)
		}
	}
}

// TestModePrintsEveryValueByWhatItIs checks the name of every value of
// the type: each of the five modes its own, any other value as a number
// of the type, never a name of a mode it is not.
func TestModePrintsEveryValueByWhatItIs(t *testing.T) {
	names := map[rlheader.Mode]string{
		rlheader.Default: "default", rlheader.Off: "off", rlheader.Legacy: "legacy",
		rlheader.Draft11: "draft-11", rlheader.Both: "both",
	}
	for i := range 256 {
		m := rlheader.Mode(i)
		want, ok := names[m]
		if !ok {
			want = fmt.Sprintf("rlheader.Mode(%d)", i)
		}
		if got := m.String(); got != want {
			t.Errorf("Mode(%d) prints %q, want %q", i, got, want)
		}
	}
}

// TestModeSaysWhichHeadersItSends checks which of the two sets of headers
// each mode sends, and that Default takes the face's default.
func TestModeSaysWhichHeadersItSends(t *testing.T) {
	for _, tt := range []struct {
		m             rlheader.Mode
		legacy, draft bool
	}{
		{rlheader.Off, false, false},
		{rlheader.Legacy, true, false},
		{rlheader.Draft11, false, true},
		{rlheader.Both, true, true},
		{rlheader.Default, false, false},
		{rlheader.Both + 1, false, false},
	} {
		if tt.m.SendsLegacy() != tt.legacy || tt.m.SendsDraft11() != tt.draft {
			t.Errorf("%v sends legacy %t, draft %t; want %t, %t", tt.m, tt.m.SendsLegacy(), tt.m.SendsDraft11(), tt.legacy, tt.draft)
		}
	}
	if got := rlheader.Default.Or(rlheader.Draft11); got != rlheader.Draft11 {
		t.Errorf("Default.Or(Draft11) = %v", got)
	}
	if got := rlheader.Off.Or(rlheader.Draft11); got != rlheader.Off {
		t.Errorf("Off.Or(Draft11) = %v", got)
	}
}

// ParseModeStrict takes exactly the four documented names: not "", not
// another case, not the old draft11.
func TestParseModeStrictTakesExactlyTheFourNames(t *testing.T) {
	for _, m := range []rlheader.Mode{rlheader.Off, rlheader.Legacy, rlheader.Draft11, rlheader.Both} {
		if got, err := rlheader.ParseModeStrict(m.String()); err != nil || got != m {
			t.Errorf("ParseModeStrict(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, s := range []string{"", "LEGACY", "draft11", "Both", "default"} {
		if _, err := rlheader.ParseModeStrict(s); err == nil {
			t.Errorf("ParseModeStrict(%q) succeeded, want an error", s)
		}
	}
}
