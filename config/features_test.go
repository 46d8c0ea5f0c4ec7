package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// A descriptor's metadata is loaded as typed values (it was refused as an
// unknown key before), and every limit of a rate_limits list carries it.
func TestMetadataLoadsTypedValues(t *testing.T) {
	c := mustParse(t, `
domain: api
descriptors:
  - key: user
    rate_limits:
      - {unit: second, requests_per_unit: 10}
      - {unit: day, requests_per_unit: 10000}
    metadata:
      team: payments
      quoted: "yes"
      n: 3
      ratio: 0.5
      flag: true
      none: null
      nested: {list: [1, two, {three: 3}]}
`)
	r := c.Lookup("api", entries("user", "bob"))
	if r == nil {
		t.Fatal("no rule")
	}
	want := map[string]any{
		"team": "payments", "quoted": "yes", "n": int64(3), "ratio": 0.5, "flag": true, "none": nil,
		"nested": map[string]any{"list": []any{int64(1), "two", map[string]any{"three": int64(3)}}},
	}
	if !reflect.DeepEqual(r.Metadata, want) {
		t.Errorf("Metadata = %#v\nwant %#v", r.Metadata, want)
	}
	if len(r.More) != 1 || !reflect.DeepEqual(r.More[0].Metadata, want) {
		t.Errorf("the list's second limit does not carry the metadata: %+v", r.More)
	}
}

// A rate_limits list compiles to the rule (its first limit) and More (the
// rest), each with its own limit and the descriptor's path and flags.
func TestRateLimitsListCompilesEveryLimit(t *testing.T) {
	c := mustParse(t, `
domain: api
descriptors:
  - key: user
    shadow_mode: true
    rate_limits:
      - {unit: second, requests_per_unit: 10}
      - {name: daily, unit: day, requests_per_unit: 10000, algorithm: sliding_window}
`)
	r := c.Lookup("api", entries("user", "bob"))
	if r == nil || len(r.More) != 1 {
		t.Fatalf("rule %+v, want one limit in More", r)
	}
	m := r.More[0]
	if r.Limit.Rate != 10 || r.Limit.Period != time.Second || m.Limit.Rate != 10000 || m.Limit.Period != 24*time.Hour {
		t.Errorf("limits %v and %v, want 10/1s and 10000/24h", r.Limit, m.Limit)
	}
	if m.Name != "daily" || m.FullKey != "api.user" || !m.ShadowMode || m.Line == r.Line {
		t.Errorf("second limit %+v: want its own name and line, the descriptor's key and flags", m)
	}
	n := 0
	for range c.RateLimits() {
		n++
	}
	if n != 2 || c.Domain("api").Rules() != 2 {
		t.Errorf("RateLimits yields %d, Rules() = %d; want 2 and 2", n, c.Domain("api").Rules())
	}
}

// Shared and ValueToMetric summarize the path: any level with
// share_threshold or value_to_metric; detailed_metric turns
// value_to_metric off, as envoyproxy/ratelimit ignores it then.
func TestPathFlagsSummarized(t *testing.T) {
	c := mustParse(t, `
domain: api
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    descriptors:
      - key: user
        value_to_metric: true
        rate_limit: {unit: minute, requests_per_unit: 5}
  - key: path
    value_to_metric: true
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 5}
`)
	r := c.Lookup("api", entries("files", "files/a.pdf", "user", "bob"))
	if r == nil || !r.Shared || !r.ValueToMetric {
		t.Errorf("files/user: %+v, want Shared and ValueToMetric", r)
	}
	if r := c.Lookup("api", entries("path", "/x")); r == nil || r.ValueToMetric || r.Shared {
		t.Errorf("detailed path: %+v, want neither flag", r)
	}
	if r := c.Lookup("api", entries("plain", "x")); r == nil || r.ValueToMetric || r.Shared {
		t.Errorf("plain: %+v, want neither flag", r)
	}
}

// With MergeDomains, two files of one domain become one domain with the
// descriptors of both (an error without it); a top-level descriptor in
// both is an error naming both files.
func TestMergeDomains(t *testing.T) {
	a, err := Parse("a.yaml", []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse("b.yaml", []byte("domain: api\ndescriptors:\n  - key: path\n    rate_limit: {unit: second, requests_per_unit: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(a, b); err == nil || !strings.Contains(err.Error(), "duplicate domain") {
		t.Errorf("New without merging: %v, want a duplicate domain error", err)
	}
	c, err := Options{MergeDomains: true}.New(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Lookup("api", entries("user", "x")) == nil || c.Lookup("api", entries("path", "x")) == nil {
		t.Error("merged domain lacks a file's rule")
	}
	if got := c.Domain("api").Rules(); got != 2 || len(c.Domains()) != 1 {
		t.Errorf("merged: %d rules in %d domains, want 2 in 1", got, len(c.Domains()))
	}
	if a.Lookup(entries("path", "x")) != nil {
		t.Error("merging changed the first file's domain")
	}
	_, err = Options{MergeDomains: true}.New(a, b, a)
	if err == nil || !strings.Contains(err.Error(), `a.yaml:3: config: duplicate descriptor: key "user"`) || !strings.Contains(err.Error(), "already at a.yaml:3") {
		t.Errorf("merging a file twice: %v, want a duplicate descriptor error naming both places", err)
	}
}

// Metadata nested past maxMetadataDepth is refused with its line, so
// that reading a hostile file cannot exhaust the stack.
func TestMetadataDepthBounded(t *testing.T) {
	deep := strings.Repeat("{a: ", maxMetadataDepth+2) + "1" + strings.Repeat("}", maxMetadataDepth+2)
	_, err := Parse("deep.yaml", []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n    metadata: "+deep+"\n"))
	if err == nil || !strings.Contains(err.Error(), "deep.yaml:5:") || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("Parse: %v, want a nesting error at line 5", err)
	}
}

// buckets sets a sliding window's sub-windows, and is refused, with the
// line of the key, on another algorithm, out of 1 to 16, or where the
// sub-windows do not divide the period in whole microseconds.
func TestBucketsLoadsOrIsRefusedAtItsLine(t *testing.T) {
	c := mustParse(t, `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: sliding_window, buckets: 4}
`)
	r := c.Lookup("api", entries("user", "bob"))
	if r == nil || r.Limit.Buckets != 4 || r.Limit.String() != "sliding_window 100/1m0s buckets 4" {
		t.Fatalf("rule %+v, want sliding_window 100/1m0s buckets 4", r)
	}
	for _, c := range []struct{ rule, want string }{
		{"{unit: minute, requests_per_unit: 100, buckets: 4}", "test.yaml:5:46: config: buckets applies only to sliding_window, not fixed_window"},
		{"{unit: minute, requests_per_unit: 100, algorithm: sliding_window, buckets: 17}", "test.yaml:5:82: config: buckets 17 is out of range [1, 16]"},
		{"{unit: second, requests_per_unit: 100, algorithm: sliding_window, buckets: 7}", "test.yaml:5:73: config: invalid limit: period 1s is not a whole number of microseconds times buckets 7"},
		{"{unlimited: true, buckets: 4}", "test.yaml:5:25: config: buckets has no effect when unlimited"},
	} {
		_, err := Parse("test.yaml", []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      "+c.rule+"\n"))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to start with %q", c.rule, err, c.want)
		}
	}
}

// moments sets the means a sliding window's sub-windows keep, and is
// refused, with the line and column of the key, on another algorithm, out
// of 0 to 8, above the rate its counts serve, or when unlimited.
func TestMomentsLoadsOrIsRefusedAtItsLine(t *testing.T) {
	c := mustParse(t, `
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 100, algorithm: sliding_window, buckets: 8, moments: 4}
`)
	r := c.Lookup("api", entries("user", "bob"))
	if r == nil || r.Limit.Moments != 4 || r.Limit.String() != "sliding_window 100/1m0s buckets 8 moments 4" {
		t.Fatalf("rule %+v, want sliding_window 100/1m0s buckets 8 moments 4", r)
	}
	for _, c := range []struct{ rule, want string }{
		{"{unit: minute, requests_per_unit: 100, moments: 4}", "test.yaml:5:46: config: moments applies only to sliding_window, not fixed_window"},
		{"{unit: minute, requests_per_unit: 100, algorithm: token_bucket, moments: 2}", "test.yaml:5:71: config: moments applies only to sliding_window, not token_bucket"},
		{"{unit: minute, requests_per_unit: 100, algorithm: sliding_window, moments: 9}", "test.yaml:5:82: config: moments 9 is out of range [0, 8]"},
		{"{unit: minute, requests_per_unit: 10001, algorithm: sliding_window, moments: 2}", "test.yaml:5:75: config: invalid limit: rate 10001 exceeds 10000, the most a sliding window with moments counts"},
		{"{unlimited: true, moments: 4}", "test.yaml:5:25: config: moments has no effect when unlimited"},
	} {
		_, err := Parse("test.yaml", []byte("domain: api\ndescriptors:\n  - key: user\n    rate_limit:\n      "+c.rule+"\n"))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to start with %q", c.rule, err, c.want)
		}
	}
}

// A sliding_window rule that sets neither buckets nor moments gets 16
// sub-windows with 2 means each where its rate and period allow them; one
// that sets either keeps what it set (buckets: 1 or moments: 0 is the
// two-window counter), and a rate above what moments count keeps the
// counter rather than being refused.
func TestSlidingWindowDefaultsToSixteenBucketsTwoMoments(t *testing.T) {
	for _, c := range []struct{ rule, want string }{
		{"{unit: minute, requests_per_unit: 100, algorithm: sliding_window}", "sliding_window 100/1m0s buckets 16 moments 2"},
		{"{unit: hour, requests_per_unit: 10000, algorithm: sliding_window}", "sliding_window 10000/1h0m0s buckets 16 moments 2"},
		{"{unit: minute, requests_per_unit: 100, algorithm: sliding_window, buckets: 1}", "sliding_window 100/1m0s"},
		{"{unit: minute, requests_per_unit: 100, algorithm: sliding_window, moments: 0}", "sliding_window 100/1m0s"},
		{"{unit: minute, requests_per_unit: 100, algorithm: sliding_window, buckets: 4}", "sliding_window 100/1m0s buckets 4"},
		{"{unit: minute, requests_per_unit: 10001, algorithm: sliding_window}", "sliding_window 10001/1m0s"},
		{"{unit: minute, requests_per_unit: 100}", "fixed_window 100/1m0s"},
	} {
		cfg := mustParse(t, "domain: api\ndescriptors:\n  - key: user\n    rate_limit: "+c.rule+"\n")
		if r := cfg.Lookup("api", entries("user", "bob")); r == nil || r.Limit.String() != c.want {
			t.Errorf("%s: rule %+v, want %s", c.rule, r, c.want)
		}
	}
}
