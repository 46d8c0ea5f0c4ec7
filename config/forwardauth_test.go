package config

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/request"
)

func TestForwardAuthParse(t *testing.T) {
	d, err := Parse("edge.yaml", []byte(`domain: edge
forward_auth:
  trusted_proxies: [10.1.2.3/8, "::ffff:192.0.2.0/120", 2001:db8::1]
  descriptors:
    - entries:
        - {key: remote_address, from: client_ip}
    - entries:
        - {key: generic_key, from: literal, value: "500"}
        - {key: tenant, from: header, header: x-tenant}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &ForwardAuth{
		Domain: "edge",
		File:   "edge.yaml",
		Line:   2,
		TrustedProxies: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("192.0.2.0/24"),
			netip.MustParsePrefix("2001:db8::1/128"),
		},
		Descriptors: []AuthDescriptor{
			{Line: 5, Entries: []AuthEntry{{Key: "remote_address", From: FromClientIP, Line: 6, Column: 11}}},
			{Line: 7, Entries: []AuthEntry{
				{Key: "generic_key", From: FromLiteral, Value: "500", Line: 8, Column: 11},
				{Key: "tenant", From: FromHeader, Header: "x-tenant", Line: 9, Column: 11},
			}},
		},
	}
	if !reflect.DeepEqual(d.ForwardAuth, want) {
		t.Errorf("ForwardAuth =\n%+v\nwant\n%+v", d.ForwardAuth, want)
	}
	if e := d.ForwardAuth.NeedsClientIP(); e == nil || e.Key != "remote_address" || e.Line != 6 {
		t.Errorf("NeedsClientIP = %+v, want the remote_address entry at line 6", e)
	}
	c, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	if c.ForwardAuth() != d.ForwardAuth {
		t.Error("Config.ForwardAuth is not the domain's section")
	}
}

func TestForwardAuthAbsent(t *testing.T) {
	d, err := Parse("plain.yaml", []byte("domain: plain\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	if d.ForwardAuth != nil || c.ForwardAuth() != nil {
		t.Errorf("a file without forward_auth has one: %+v", c.ForwardAuth())
	}
	var nilConfig *Config
	if nilConfig.ForwardAuth() != nil {
		t.Error("nil Config has a forward_auth")
	}
	fa := &ForwardAuth{Descriptors: []AuthDescriptor{{Entries: []AuthEntry{{Key: "m", From: FromMethod}}}}}
	if e := fa.NeedsClientIP(); e != nil {
		t.Errorf("NeedsClientIP without a client_ip entry = %+v", e)
	}
}

// Only one domain may have a forward_auth section; the error names the
// second and where the first is.
func TestForwardAuthTwoDomains(t *testing.T) {
	section := "forward_auth:\n  descriptors:\n    - entries: [{key: m, from: method}]\n"
	dir := writeFiles(t, map[string]string{
		"a.yaml": "domain: alpha\n" + section,
		"b.yaml": "# b\ndomain: beta\n" + section,
	})
	_, err := Load(dir)
	want := filepath.Join(dir, "b.yaml") + `:3: config: a second forward_auth, in domain "beta" (the first is domain "alpha"'s, at ` +
		filepath.Join(dir, "a.yaml") + ":2)"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Load = %v, want an error starting %q", err, want)
	}
}

func TestAuthSourceString(t *testing.T) {
	for i, want := range []string{"client_ip", "method", "uri", "path", "header", "literal", "host", "unknown"} {
		if got := AuthSource(i).String(); got != want {
			t.Errorf("AuthSource(%d) = %q, want %q", i, got, want)
		}
	}
}

// A rule value that forward auth's canonical method, path or URI can never
// equal is an error with its line, naming the value to write; canonical
// values, wildcards and keys filled from other sources are left alone.
func TestForwardAuthRuleValuesAreCanonical(t *testing.T) {
	const head = "domain: edge\ndescriptors:\n  - key: method\n    value: %s\n    descriptors:\n      - key: path\n        value: %s\n        rate_limit: {unit: minute, requests_per_unit: 5}\n" +
		"  - key: other\n    value: /x/\n    rate_limit: {unit: minute, requests_per_unit: 5}\n" +
		"forward_auth:\n  descriptors:\n    - entries: [{key: method, from: method}, {key: path, from: path}]\n"
	for _, tc := range []struct{ method, path, err string }{
		{"POST", "/login", ""},
		{"POST", `"/api/*"`, ""},
		{"post", "/login", `edge.yaml:3: config: value "post" of key "method" never matches: forward_auth reads the method in canonical form (write "POST")`},
		{"POST", "/login/", `edge.yaml:6: config: value "/login/" of key "path" never matches: forward_auth reads the path in canonical form (write "/login")`},
		{"POST", "//a/./b/../%6Cogin", `(write "/a/login")`},
		{"POST", "/a%2Fb", `(write "/a/b")`},
		{"POST", "/%zz", `value "/%zz" of key "path" never matches: forward_auth reads the path in canonical form`},
	} {
		_, err := Parse("edge.yaml", fmt.Appendf(nil, head, tc.method, tc.path))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %s: %v", tc.method, tc.path, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %s: error %v, want it to contain %q", tc.method, tc.path, err, tc.err)
		}
	}
}

// from: host is a source, and its rule values must be canonical hosts.
func TestForwardAuthHostSource(t *testing.T) {
	const cfg = "domain: edge\ndescriptors:\n  - key: host\n    value: %s\n    rate_limit: {unit: minute, requests_per_unit: 5}\n" +
		"forward_auth:\n  descriptors:\n    - entries: [{key: host, from: host}]\n"
	d, err := Parse("edge.yaml", fmt.Appendf(nil, cfg, "api.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	if e := d.ForwardAuth.Descriptors[0].Entries[0]; e.From != FromHost || e.From.String() != "host" {
		t.Errorf("entry %+v, want from host", e)
	}
	_, err = Parse("edge.yaml", fmt.Appendf(nil, cfg, "API.example.com."))
	if want := `(write "api.example.com")`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a host value not in canonical form: %v, want an error containing %s", err, want)
	}
}

// path_semantics says how the application reads a path: it is compiled
// into ForwardAuth.PathSemantics, and a rule value of a path key must be
// as that semantics folds it ("/Login" never matches under
// case_insensitive, whose paths are in lower case); an unknown name is an
// error with its line.
func TestForwardAuthPathSemantics(t *testing.T) {
	const cfg = "domain: edge\ndescriptors:\n  - key: path\n    value: %s\n    rate_limit: {unit: minute, requests_per_unit: 5}\n" +
		"forward_auth:\n  path_semantics: %s\n  descriptors:\n    - entries: [{key: path, from: path}]\n"
	d, err := Parse("edge.yaml", fmt.Appendf(nil, cfg, "/login", "iis"))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.ForwardAuth.PathSemantics; got != request.PathIIS {
		t.Errorf("PathSemantics = %v, want iis", got)
	}
	for _, tc := range []struct{ value, sem, err string }{
		{"/Login", "case_insensitive", `edge.yaml:3: config: value "/Login" of key "path" never matches: forward_auth reads the path in canonical form, folded as path_semantics case_insensitive says (write "/login")`},
		{"/login;v=1", "servlet", `(write "/login")`},
		{"/Login", "strict", ""},
		{"/login", "tomcat", `edge.yaml:7:19: config: path_semantics "tomcat": want strict, case_insensitive, iis or servlet`},
	} {
		_, err := Parse("edge.yaml", fmt.Appendf(nil, cfg, tc.value, tc.sem))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s %s: %v", tc.sem, tc.value, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %s: error %v, want it to contain %q", tc.sem, tc.value, err, tc.err)
		}
	}
}
