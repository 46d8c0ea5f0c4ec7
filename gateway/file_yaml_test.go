package gateway_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/strictyaml"
)

// TestProxyFileReadsYAMLAsTheRateLimitConfigDoes checks that the proxy
// file is read by the same strict reader as the rate limit config: merge
// keys work, a duplicate key names the first, an unknown key suggests
// the intended one, and aliases count against the file's node budget.
func TestProxyFileReadsYAMLAsTheRateLimitConfigDoes(t *testing.T) {
	f, err := gateway.ParseFile("proxy.yaml", []byte(
		"upstream: http://u\nlimits:\n  - &ip {name: per_ip, key: ip, rate: 10r/s, burst: 5}\n  - {<<: *ip, name: per_ip_slow, rate: 1r/s}\n"))
	if err != nil {
		t.Fatalf("merge key: %v", err)
	}
	if f == nil {
		t.Fatal("ParseFile returned nil")
	}

	var laughs strings.Builder
	laughs.WriteString("upstream: http://u\nroutes:\n  - name: r\n    match: &m0 [/a, /b, /c, /d, /e, /f, /g, /h, /i, /j]\n")
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&laughs, "  - name: r%d\n    match: &m%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d, ", i-1), 10), ", "))
	}
	for _, tt := range []struct {
		name, yaml, want string
		is               error
	}{
		{"duplicate key", "upstream: http://u\nlimits:\n  - {name: a, key: ip, rate: 1r/s, key: uri}\n", `proxy.yaml:3:36: config: duplicate key "key" in a limit (first at line 3)`, nil},
		{"unknown key", "upstream: http://u\nlimts: []\n", `proxy.yaml:2:1: config: unknown key "limts" in the file (did you mean "limits"?)`, nil},
		{"billion laughs", laughs.String(), "proxy.yaml:", strictyaml.ErrBudget},
		{"alias inside itself", "upstream: http://u\nlimits: &l [*l]\n", "proxy.yaml:2:13: config: alias *l is inside the node it names", strictyaml.ErrCycle},
	} {
		_, err := gateway.ParseFile("proxy.yaml", []byte(tt.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to start with %q", tt.name, err, tt.want)
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: error %v does not wrap %v", tt.name, err, tt.is)
		}
		if _, ok := errors.AsType[*config.Error](err); !ok {
			t.Errorf("%s: error %T is not a *config.Error", tt.name, err)
		}
	}
}

// headers: takes exactly the four values docs/proxy.md lists; an empty or
// null value, another case or the old draft11 is an error naming the
// line, not draft-11 (the default of a file without the key).
func TestProxyFileHeadersTakesExactlyTheDocumentedValues(t *testing.T) {
	for _, v := range []string{"off", "legacy", "draft-11", "both"} {
		if _, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://u\nheaders: "+v+"\n")); err != nil {
			t.Errorf("headers: %s: %v", v, err)
		}
	}
	for _, v := range []string{`""`, "~", "null", "", "LEGACY", "draft11", "Both"} {
		_, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://u\nheaders: "+v+"\n"))
		if err == nil || !strings.HasPrefix(err.Error(), "proxy.yaml:2:") || !strings.Contains(err.Error(), "off, legacy, draft-11 or both") {
			t.Errorf("headers: %s: %v, want an error at proxy.yaml:2 naming the four values", v, err)
		}
	}
}
