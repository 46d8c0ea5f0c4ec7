// Package configtest compiles rate limit configurations from YAML text for
// tests, failing the test on any error.
//
// Test-only: only tests import it; a package that ships may not
// (internal/archtest holds that).
package configtest

import (
	"testing"

	"github.com/sluicehq/sluice/config"
)

// Parse parses src as one configuration file named rules.yaml and compiles
// it, as serve does with a file it loads. A parse or compile error fails t.
func Parse(t testing.TB, src string) *config.Config {
	t.Helper()
	d, err := config.Parse("rules.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.New(d)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
