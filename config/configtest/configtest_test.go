package configtest_test

import (
	"testing"

	"github.com/sluicehq/sluice/config/configtest"
)

func TestParseCompilesTheDomainItIsGiven(t *testing.T) {
	c := configtest.Parse(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	if c.Domain("d") == nil || c.Domain("other") != nil {
		t.Fatalf("domains: %v", c.Domains())
	}
}
