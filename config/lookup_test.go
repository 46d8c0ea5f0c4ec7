package config

import (
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

func mustParse(t testing.TB, src string) *Config {
	t.Helper()
	d, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	c, err := New(d)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// entries builds a request descriptor from key, value pairs.
func entries(kv ...string) []Entry {
	var es []Entry
	for i := 0; i+1 < len(kv); i += 2 {
		es = append(es, Entry{kv[i], kv[i+1]})
	}
	return es
}

const matchConfig = `
domain: match
descriptors:
  - key: uri
    value: /static/logo.svg
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: uri
    value: /static/*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: uri
    value: "*.mp4"
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: uri
    value: /v*/users/*/avatar
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: uri
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: any
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 6}
  - key: tier
    value: gold
    rate_limit: {unit: second, requests_per_unit: 7}
    descriptors:
      - key: region
        rate_limit: {unit: second, requests_per_unit: 8}
  - key: tier
    descriptors:
      - key: region
        value: eu
        rate_limit: {unit: second, requests_per_unit: 9}
  - key: tier
    value: silver
  - key: remote_address
    descriptors:
      - key: path
        rate_limit: {unit: second, requests_per_unit: 10}
`

func TestLookupMatching(t *testing.T) {
	c := mustParse(t, matchConfig)
	tests := []struct {
		name    string
		domain  string
		entries []Entry
		want    uint32 // requests_per_unit of the rule; 0 for none
	}{
		{"exact beats wildcard", "match", entries("uri", "/static/logo.svg"), 1},
		{"trailing wildcard is a prefix match", "match", entries("uri", "/static/app.js"), 2},
		{"prefix match includes the empty rest", "match", entries("uri", "/static/"), 2},
		{"first wildcard in config order wins", "match", entries("uri", "/static/intro.mp4"), 2},
		{"leading wildcard is a suffix match", "match", entries("uri", "/movies/intro.mp4"), 3},
		{"suffix must end the value", "match", entries("uri", "/movies/intro.mp4.part"), 5},
		{"wildcards in the middle", "match", entries("uri", "/v2/users/42/avatar"), 4},
		{"middle wildcard needs its literal parts", "match", entries("uri", "/v2/groups/42/avatar"), 5},
		{"key-only when nothing more specific", "match", entries("uri", "/index.html"), 5},
		{"key-only matches an empty value", "match", entries("uri", ""), 5},
		{"lone star matches anything", "match", entries("any", "whatever"), 6},
		{"lone star matches the empty value", "match", entries("any", ""), 6},
		{"unknown key", "match", entries("nope", "x"), 0},
		{"keys are case-sensitive", "match", entries("URI", "/index.html"), 0},
		{"rule at depth one", "match", entries("tier", "gold"), 7},
		{"rule at depth two under a rule", "match", entries("tier", "gold", "region", "us"), 8},
		{"D40: request deeper than every rule", "match", entries("tier", "gold", "region", "us", "zone", "a"), 0},
		{"D40: request deeper than a leaf rule", "match", entries("uri", "/index.html", "method", "GET"), 0},
		{"request shallower than the rule", "match", entries("remote_address", "192.0.2.1"), 0},
		{"nested key-only then key-only", "match", entries("remote_address", "192.0.2.1", "path", "/login"), 10},
		{"key-only parent with exact child", "match", entries("tier", "bronze", "region", "eu"), 9},
		{"no backtracking to a less specific parent", "match", entries("tier", "gold", "region", "eu"), 8},
		{"no backtracking from a childless exact match", "match", entries("tier", "silver", "region", "eu"), 0},
		{"an allow-listed descriptor has no rule", "match", entries("tier", "silver"), 0},
		{"entry order matters", "match", entries("path", "/login", "remote_address", "192.0.2.1"), 0},
		{"unknown domain", "nope", entries("uri", "/index.html"), 0},
		{"no entries", "match", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := c.Lookup(tt.domain, tt.entries)
			var got uint32
			if r != nil {
				got = r.RequestsPerUnit
				if len(r.Path) != len(tt.entries) {
					t.Errorf("rule %s has a path of %d, matched by %d entries", r.FullKey, len(r.Path), len(tt.entries))
				}
			}
			if got != tt.want || (r == nil) != (tt.want == 0) {
				t.Errorf("Lookup(%q, %v) = %v, want the rule with requests_per_unit %d", tt.domain, tt.entries, r, tt.want)
			}
		})
	}
}

func TestLookupNilConfig(t *testing.T) {
	var c *Config
	if r := c.Lookup("d", entries("k", "v")); r != nil {
		t.Errorf("nil Config: Lookup = %v, want nil", r)
	}
	if c.Domain("d") != nil || c.Domains() != nil {
		t.Error("nil Config has domains")
	}
}

// A Config of one domain answers that domain's rules and no other
// domain's, as a Config of several does: Lookup compares its one domain's
// name instead of asking the map, and must still refuse another name,
// however close (a prefix, a different case, empty).
func TestLookupOfOneDomainAnswersNoOtherDomain(t *testing.T) {
	one := mustParse(t, "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	other, err := Parse("other.yaml", []byte("domain: web\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	two, err := New(one.Domain("api"), other)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]*Config{"one domain": one, "two domains": two} {
		if r := c.Lookup("api", entries("user", "x")); r == nil || r.RequestsPerUnit != 1 {
			t.Errorf("%s: Lookup(api) = %v, want the rule of 1/s", name, r)
		}
		for _, d := range []string{"ap", "apix", "API", ""} {
			if r := c.Lookup(d, entries("user", "x")); r != nil {
				t.Errorf("%s: Lookup(%q) = %v, want nil (unknown domain)", name, d, r)
			}
		}
	}
}

// envoyCasesConfig holds the rules of cases D33–D40 of the standards.
const envoyCasesConfig = `
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: logs
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: database
    value: audit
    shadow_mode: true
    rate_limit:
      unit: minute
      requests_per_unit: 5
  - key: database
    value: local
    rate_limit:
      unlimited: true
  - key: database
    value: banned
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: key
    value: value
    rate_limit:
      unit: second
      requests_per_unit: 300
`

// TestLookupEnvoyCaseFixedWindow checks what case D34 of the standards needs from
// the config: the rule, its fields and its sluice.Limit.
func TestLookupEnvoyCaseFixedWindow(t *testing.T) {
	c := mustParse(t, envoyCasesConfig)
	// D34.
	r := c.Lookup("mongo_cps", entries("database", "users"))
	if r == nil {
		t.Fatal("D34: no rule for (database, users)")
	}
	want := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 500, Period: time.Second, Burst: 500}
	if r.FullKey != "mongo_cps.database_users" || r.Unit != Second || r.RequestsPerUnit != 500 || r.Limit != want || r.Period() != time.Second {
		t.Errorf("D34: got %+v, want FullKey mongo_cps.database_users, 500 per second, Limit %v", r, want)
	}
	if r.Unlimited || r.ShadowMode || r.BlocksAll() {
		t.Errorf("D34: flags set on %+v", r)
	}
}

// TestLookupEnvoyCaseFlags checks the unit, shadow_mode, unlimited and
// blocking rules of cases D35–D38 of the standards.
func TestLookupEnvoyCaseFlags(t *testing.T) {
	c := mustParse(t, envoyCasesConfig)
	// D35, D36.
	r := c.Lookup("mongo_cps", entries("database", "logs"))
	if r == nil || r.Unit != Minute || r.Period() != time.Minute || r.Limit.Rate != 5 || r.ShadowMode {
		t.Errorf("D35/D36: got %+v, want 5 per minute, enforced", r)
	}
	// D37.
	if r = c.Lookup("mongo_cps", entries("database", "audit")); r == nil || !r.ShadowMode {
		t.Errorf("D37: got %+v, want shadow_mode", r)
	}
	// D38.
	if r = c.Lookup("mongo_cps", entries("database", "local")); r == nil || !r.Unlimited || r.Unit != UnitUnknown || r.BlocksAll() {
		t.Errorf("D38: got %+v, want unlimited without a unit", r)
	}
	// requests_per_unit 0 blocks.
	if r = c.Lookup("mongo_cps", entries("database", "banned")); r == nil || !r.BlocksAll() || r.Limit.Validate() == nil {
		t.Errorf("got %+v, want a rule that blocks all", r)
	}
}

// TestLookupEnvoyCaseDepths checks cases D40 (a rule at the request's own
// depth only) and D33 (an empty domain has no rules) of the standards.
func TestLookupEnvoyCaseDepths(t *testing.T) {
	c := mustParse(t, envoyCasesConfig)
	// D40.
	if r := c.Lookup("mongo_cps", entries("key", "value", "subkey", "subvalue")); r != nil {
		t.Errorf("D40: got %+v, want no rule", r)
	}
	if r := c.Lookup("mongo_cps", entries("key", "value")); r == nil || r.RequestsPerUnit != 300 {
		t.Errorf("D40 at the right depth: got %+v, want 300 per second", r)
	}
	// D33 is the service's: an empty domain is not configured.
	if r := c.Lookup("", entries("database", "users")); r != nil {
		t.Errorf("empty domain: got %+v, want nil", r)
	}
}

func TestRulePath(t *testing.T) {
	c := mustParse(t, `
domain: files
descriptors:
  - key: tenant
    value_to_metric: true
    descriptors:
      - key: path
        value: /files/*
        share_threshold: true
        rate_limit: {unit: hour, requests_per_unit: 100, unit_multiplier: 2, algorithm: token_bucket, burst: 10}
`)
	r := c.Lookup("files", entries("tenant", "t1", "path", "/files/a.pdf"))
	if r == nil {
		t.Fatal("no rule")
	}
	want := []PathEntry{
		{Key: "tenant", ValueToMetric: true},
		{Key: "path", Value: "/files/*", Wildcard: true, ShareThreshold: true},
	}
	if len(r.Path) != 2 || r.Path[0] != want[0] || r.Path[1] != want[1] {
		t.Errorf("Path = %+v, want %+v", r.Path, want)
	}
	if r.FullKey != "files.tenant.path_/files/*" {
		t.Errorf("FullKey = %q", r.FullKey)
	}
	lim := sluice.Limit{Algorithm: sluice.TokenBucket, Rate: 100, Period: 2 * time.Hour, Burst: 10}
	if r.Limit != lim || r.Period() != 2*time.Hour || r.UnitMultiplier != 2 {
		t.Errorf("Limit = %v, Period %v; want %v", r.Limit, r.Period(), lim)
	}
	if r.File != "test.yaml" || r.Line != 10 {
		t.Errorf("rule at %s:%d, want test.yaml:10", r.File, r.Line)
	}
}

func TestPattern(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"foo*", "foo", true},
		{"foo*", "foobar", true},
		{"foo*", "fo", false},
		{"*bar", "bar", true},
		{"*bar", "foobar", true},
		{"*bar", "barx", false},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "acb", false},
		{"a*b*c", "abcbc", true},
		{"a*a", "a", false},
		{"a*a", "aa", true},
		{"**", "", true},
		{"*x*", "", false},
		{"*x*", "abxcd", true},
	}
	for _, tt := range tests {
		if got := compile(tt.pat).match(tt.s); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.pat, tt.s, got, tt.want)
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	c := mustParse(t, matchConfig)
	reqs := [][]Entry{
		entries("uri", "/static/logo.svg"),
		entries("uri", "/v2/users/42/avatar"),
		entries("uri", "/index.html"),
		entries("tier", "gold", "region", "us"),
		entries("remote_address", "192.0.2.1", "path", "/login"),
		entries("nope", "x"),
	}
	for _, req := range reqs {
		if n := testing.AllocsPerRun(100, func() { c.Lookup("match", req) }); n != 0 {
			t.Errorf("Lookup(%v) allocates %v times", req, n)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	c := mustParse(b, matchConfig)
	for _, bc := range []struct {
		name string
		req  []Entry
	}{
		{"depth=1/exact", entries("uri", "/static/logo.svg")},
		{"depth=1/wildcard", entries("uri", "/v2/users/42/avatar")},
		{"depth=1/key-only", entries("uri", "/index.html")},
		{"depth=2/key-only", entries("remote_address", "192.0.2.1", "path", "/login")},
		{"miss", entries("nope", "x")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Lookup("match", bc.req)
			}
		})
	}
}
