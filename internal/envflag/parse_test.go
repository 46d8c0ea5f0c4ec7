package envflag_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/envflag"
)

// A number variable takes a finite number within its bounds; NaN, an
// infinity, one out of range or a malformed one is refused by name.
func TestFloat(t *testing.T) {
	testReader(t, "Float", func(errs *envflag.Errs) float64 { return errs.Float("ENVFLAG_TEST", 0.8, 0, 1, "a number from 0 to 1") }, []readerCase[float64]{
		{"unset", nil, 0.8, false},
		{"empty", ptr(""), 0.8, false},
		{"within", ptr("0.5"), 0.5, false},
		{"the bounds", ptr("1"), 1, false},
		{"zero", ptr("0"), 0, false},
		{"spaces trimmed", ptr(" 0.25 "), 0.25, false},
		{"above", ptr("1.5"), 0.8, true},
		{"below", ptr("-0.1"), 0.8, true},
		{"NaN", ptr("NaN"), 0.8, true},
		{"malformed", ptr("most"), 0.8, true},
	})
	testReader(t, "Float unbounded above", func(errs *envflag.Errs) float64 {
		return errs.Float("ENVFLAG_TEST", 0.5, 0, math.MaxFloat64, "a number, 0 or more")
	}, []readerCase[float64]{
		{"large", ptr("1e300"), 1e300, false},
		{"infinity", ptr("+Inf"), 0.5, true},
		{"negative", ptr("-1"), 0.5, true},
	})
}

// An age is a Go duration or a whole number of days, positive; anything
// else is refused with the value and both forms.
func TestParseAge(t *testing.T) {
	for s, want := range map[string]time.Duration{"90d": 90 * 24 * time.Hour, "2160h": 2160 * time.Hour, "1s": time.Second, "36600d": 36600 * 24 * time.Hour} {
		if got, err := envflag.ParseAge(s); err != nil || got != want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "0d", "0s", "-1h", "-2d", "1.5d", "d", "36601d", "90 d", "ninety"} {
		_, err := envflag.ParseAge(s)
		if err == nil || !strings.HasPrefix(err.Error(), `"`+s+`": want a positive Go duration (2160h) or number of days (90d)`) {
			t.Errorf("ParseAge(%q): %v, want an error naming it and the forms", s, err)
		}
	}
}

// A list is its comma-separated items, trimmed, empty ones dropped.
func TestList(t *testing.T) {
	for s, want := range map[string][]string{"": nil, " , ": nil, "a": {"a"}, " 10.0.0.0/8 ,, 192.0.2.1 ": {"10.0.0.0/8", "192.0.2.1"}} {
		if got := envflag.List(s); !slices.Equal(got, want) || (want == nil) != (got == nil) {
			t.Errorf("List(%q) = %q, want %q", s, got, want)
		}
	}
}
