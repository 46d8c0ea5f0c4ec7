package gateway_test

import (
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/gateway"
)

// TestProxyFileAndRateLimitConfigReadBooleansAlike checks that a boolean
// reads the same in the proxy file (dry_run) and in the rate limit config
// (shadow_mode): YAML 1.2's true and false, YAML 1.1's plain y, yes, on,
// n, no and off as envoyproxy/ratelimit reads them, null as false, and a
// quoted string refused by both.
func TestProxyFileAndRateLimitConfigReadBooleansAlike(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  bool
		bad   bool
	}{
		{"true", true, false}, {"True", true, false}, {"FALSE", false, false},
		{"yes", true, false}, {"On", true, false}, {"y", true, false},
		{"no", false, false}, {"OFF", false, false}, {"N", false, false},
		{"~", false, false}, {"null", false, false},
		{`"yes"`, false, true}, {`"true"`, false, true}, {"2", false, true}, {"[true]", false, true},
	} {
		f, perr := gateway.ParseFile("proxy.yaml", []byte("upstream: http://u\ndry_run: "+tt.value+"\n"))
		d, cerr := config.Parse("c.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    shadow_mode: "+tt.value+"\n    rate_limit: {unit: second, requests_per_unit: 1}\n"))
		if tt.bad {
			if perr == nil || cerr == nil {
				t.Errorf("%s: proxy file error %v, config error %v; want both refused", tt.value, perr, cerr)
				continue
			}
			if !strings.Contains(perr.Error(), "must be true or false") || !strings.Contains(cerr.Error(), "must be true or false") {
				t.Errorf("%s: errors %q and %q, want both to say it must be true or false", tt.value, perr, cerr)
			}
			continue
		}
		if perr != nil || cerr != nil {
			t.Errorf("%s: proxy file error %v, config error %v; want both read", tt.value, perr, cerr)
			continue
		}
		if f.Config.DryRun != tt.want {
			t.Errorf("dry_run: %s read as %t, want %t", tt.value, f.Config.DryRun, tt.want)
		}
		if got := d.Lookup([]config.Entry{{Key: "k", Value: "v"}}).ShadowMode; got != tt.want {
			t.Errorf("shadow_mode: %s read as %t, want %t", tt.value, got, tt.want)
		}
	}
}

// TestProxyFileAndRateLimitConfigReadStringsAlike checks that a string
// reads the same in the proxy file (access_log) and in the rate limit
// config (a rate limit's name): null in each of its forms as "", as an
// absent key is, a number as written, and a list refused by both.
func TestProxyFileAndRateLimitConfigReadStringsAlike(t *testing.T) {
	for _, tt := range []struct {
		value string
		want  string
		bad   bool
	}{
		{"~", "", false}, {"null", "", false}, {"", "", false}, {`""`, "", false},
		{"x.log", "x.log", false}, {"500", "500", false},
		{"[x.log]", "", true},
	} {
		f, perr := gateway.ParseFile("proxy.yaml", []byte("upstream: http://u\naccess_log: "+tt.value+"\n"))
		d, cerr := config.Parse("c.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: "+tt.value+"}\n"))
		if tt.bad {
			if perr == nil || cerr == nil || !strings.Contains(perr.Error(), "must be a string") || !strings.Contains(cerr.Error(), "must be a string") {
				t.Errorf("%s: proxy file error %v, config error %v; want both to say it must be a string", tt.value, perr, cerr)
			}
			continue
		}
		if perr != nil || cerr != nil {
			t.Errorf("%s: proxy file error %v, config error %v; want both read", tt.value, perr, cerr)
			continue
		}
		if f.AccessLog != tt.want {
			t.Errorf("access_log: %s read as %q, want %q", tt.value, f.AccessLog, tt.want)
		}
		if got := d.Lookup([]config.Entry{{Key: "k", Value: "v"}}).Name; got != tt.want {
			t.Errorf("name: %s read as %q, want %q", tt.value, got, tt.want)
		}
	}
}

// null is the empty string in both files, and a key whose value is one of
// a set refuses it as it refuses "", naming the key and its line, rather
// than reading it as the key left out: so for each such key of the proxy
// file, and for the rate limit config's, alike.
func TestProxyFileAndRateLimitConfigRefuseNullForAKeyOfASet(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"upstream: http://u\nforwarded_header: ~\n", "proxy.yaml:2:19: config: forwarded_header:"},
		{"upstream: http://u\npath_semantics: ~\n", `proxy.yaml:2:17: config: path_semantics "": want`},
		{"upstreams: [{name: a, url: http://u, path_semantics: ~}]\n", `proxy.yaml:1:54: config: path_semantics "": want`},
		{"upstream: http://u\nlimits: [{name: l, key: ip, rate: 1r/s, algorithm: ~}]\n", `proxy.yaml:2:52: config: algorithm "": want`},
		{"upstream: http://u\nlimits: [{name: l, key: ip, rate: 1r/s, missing_key: ~}]\n", `proxy.yaml:2:54: config: missing_key "": want reject or skip`},
		{"upstream: http://u\nconns: [{name: l, key: ip, max: 1, missing_key: ~}]\n", `proxy.yaml:2:49: config: missing_key "": want reject or skip`},
		{"upstream: http://u\nheaders: ~\n", "proxy.yaml:2:10: config: headers:"},
	} {
		if _, err := gateway.ParseFile("proxy.yaml", []byte(tt.yaml)); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q: %v, want an error starting %q", tt.yaml, err, tt.want)
		}
	}
	for _, tt := range []struct{ key, want string }{
		{"algorithm", `c.yaml:4:65: config: unknown algorithm ""`},
		{"failure_mode", `c.yaml:4:68: config: unknown failure_mode ""`},
	} {
		_, err := config.Parse("c.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, "+tt.key+": ~}\n"))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%s: ~ in the rate limit config: %v, want an error starting %q", tt.key, err, tt.want)
		}
	}
}
