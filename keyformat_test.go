package sluice_test

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// TestKeyFormatNamesParseBack checks that each key format's name parses
// back to it in any case, that "" is KeySluice, and that another name is
// refused.
func TestKeyFormatNamesParseBack(t *testing.T) {
	for s, want := range map[string]sluice.KeyFormat{"": sluice.KeySluice, "sluice": sluice.KeySluice, "ENVOY": sluice.KeyEnvoy, "Envoy": sluice.KeyEnvoy} {
		if got, err := sluice.ParseKeyFormat(s); err != nil || got != want {
			t.Errorf("ParseKeyFormat(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, f := range []sluice.KeyFormat{sluice.KeySluice, sluice.KeyEnvoy} {
		if got, err := sluice.ParseKeyFormat(f.String()); err != nil || got != f {
			t.Errorf("ParseKeyFormat(%q) = %v, %v; want %v", f.String(), got, err, f)
		}
	}
	if _, err := sluice.ParseKeyFormat("lyft"); err == nil {
		t.Error("ParseKeyFormat(lyft) succeeded, want an error")
	}
}
