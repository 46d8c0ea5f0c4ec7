package xdsconfig

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/config/configtest"
)

// pack wraps resources as a response carries them.
func pack(t *testing.T, rs ...proto.Message) []*anypb.Any {
	t.Helper()
	out := make([]*anypb.Any, len(rs))
	for i, r := range rs {
		a, err := anypb.New(r)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

func limit(unit rlconf.RateLimitUnit, n uint32) *rlconf.RateLimitPolicy {
	return &rlconf.RateLimitPolicy{Unit: unit, RequestsPerUnit: n}
}

// mongo is envoyproxy/ratelimit's README example as a resource; mongoYAML
// is the same as a file.
var mongo = &rlconf.RateLimitConfig{
	Name: "mongo", Domain: "mongo_cps",
	Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "database", Value: "users", RateLimit: limit(rlconf.RateLimitUnit_SECOND, 500), DetailedMetric: true},
		{Key: "database", Value: "default", RateLimit: limit(rlconf.RateLimitUnit_SECOND, 50), ShadowMode: true},
		{Key: "client", Descriptors: []*rlconf.RateLimitDescriptor{
			{Key: "path", Value: "/a", RateLimit: &rlconf.RateLimitPolicy{Name: "a", Unit: rlconf.RateLimitUnit_MINUTE, RequestsPerUnit: 10}},
			{Key: "path", RateLimit: &rlconf.RateLimitPolicy{Unit: rlconf.RateLimitUnit_HOUR, RequestsPerUnit: 100, Replaces: []*rlconf.RateLimitReplace{{Name: "a"}}}},
			{Key: "free", RateLimit: &rlconf.RateLimitPolicy{Unlimited: true}},
		}},
	},
}

const mongoYAML = `domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit: {unit: second, requests_per_unit: 500}
    detailed_metric: true
  - key: database
    value: default
    rate_limit: {unit: second, requests_per_unit: 50}
    shadow_mode: true
  - key: client
    descriptors:
      - key: path
        value: /a
        rate_limit: {name: a, unit: minute, requests_per_unit: 10}
      - key: path
        rate_limit: {unit: hour, requests_per_unit: 100, replaces: [{name: a}]}
      - key: free
        rate_limit: {unlimited: true}
`

// dump is c's compiled trees as text.
func dump(c *config.Config) string {
	var b bytes.Buffer
	c.Dump(&b)
	return b.String()
}

// rules is dump without the domain lines, which name the source.
func rules(c *config.Config) string {
	var out []string
	for l := range strings.Lines(dump(c)) {
		if !strings.HasPrefix(l, "domain ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

func TestResourceCompilesToWhatTheSameFileCompilesTo(t *testing.T) {
	got, err := Compile(config.Options{}, pack(t, mongo))
	if err != nil {
		t.Fatal(err)
	}
	want := configtest.Parse(t, mongoYAML)
	if rules(got) != rules(want) {
		t.Errorf("from xDS:\n%s\nfrom the file:\n%s", dump(got), dump(want))
	}
	r := got.Lookup("mongo_cps", []config.Entry{{Key: "database", Value: "users"}})
	if r == nil || r.RequestsPerUnit != 500 || r.Unit != config.Second || !r.DetailedMetric {
		t.Fatalf("database=users: %+v", r)
	}
	if r.File != "xds:mongo" {
		t.Errorf("the rule's file is %q, want the resource's name xds:mongo", r.File)
	}
}

func TestBadResourceFailsWithTheFileErrorNamingTheResource(t *testing.T) {
	bad := &rlconf.RateLimitConfig{Name: "bad", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "k", RateLimit: limit(rlconf.RateLimitUnit_MINUTE, 1)},
		{Key: "k", RateLimit: limit(rlconf.RateLimitUnit_MINUTE, 2)},
	}}
	_, xerr := Compile(config.Options{}, pack(t, mongo, bad))
	ce, ok := errors.AsType[*config.Error](xerr)
	if !ok || ce.File != "xds:bad" || ce.Line == 0 {
		t.Fatalf("err = %v, want a *config.Error in xds:bad with a line", xerr)
	}
	// The same descriptors in a file fail with the same message.
	doc, err := Document(bad)
	if err != nil {
		t.Fatal(err)
	}
	_, ferr := config.Parse("xds:bad", doc)
	if ferr == nil || ferr.Error() != xerr.Error() {
		t.Errorf("file error %v, xDS error %v: want the same", ferr, xerr)
	}
}

func TestResourceWithoutNameIsNamedByItsPosition(t *testing.T) {
	bad := &rlconf.RateLimitConfig{Descriptors: []*rlconf.RateLimitDescriptor{{Key: "k"}}}
	_, err := Compile(config.Options{}, pack(t, mongo, bad))
	if ce, ok := errors.AsType[*config.Error](err); !ok || ce.File != "xds:#1" || !strings.Contains(err.Error(), "domain") {
		t.Fatalf("err = %v, want a missing domain in xds:#1", err)
	}
}

func TestTwoResourcesOfOneDomainAreRefusedUnlessMerged(t *testing.T) {
	a := &rlconf.RateLimitConfig{Name: "a", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{{Key: "x", RateLimit: limit(rlconf.RateLimitUnit_MINUTE, 1)}}}
	b := &rlconf.RateLimitConfig{Name: "b", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{{Key: "y", RateLimit: limit(rlconf.RateLimitUnit_MINUTE, 2)}}}
	if _, err := Compile(config.Options{}, pack(t, a, b)); err == nil || !strings.Contains(err.Error(), "duplicate domain") {
		t.Fatalf("err = %v, want duplicate domain", err)
	}
	c, err := Compile(config.Options{MergeDomains: true}, pack(t, a, b))
	if err != nil {
		t.Fatal(err)
	}
	if c.Lookup("d", []config.Entry{{Key: "y", Value: "1"}}) == nil || c.Lookup("d", []config.Entry{{Key: "x", Value: "1"}}) == nil {
		t.Errorf("merged domain lacks a resource's rules:\n%s", dump(c))
	}
}

func TestNoResourcesIsAConfigOfNoDomains(t *testing.T) {
	c, err := Compile(config.Options{}, nil)
	if err != nil || len(c.Domains()) != 0 {
		t.Fatalf("Compile(nil) = %v, %v; want no domains", c, err)
	}
}

// withUnknown returns r's encoding with the raw fields appended to its
// first descriptor, as a control plane built with a newer proto sends it.
func withUnknown(t *testing.T, r *rlconf.RateLimitConfig, raw []byte) *anypb.Any {
	t.Helper()
	r = proto.Clone(r).(*rlconf.RateLimitConfig)
	r.Descriptors[0].ProtoReflect().SetUnknown(raw)
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return &anypb.Any{TypeUrl: TypeURL, Value: b}
}

func TestNewerProtoFieldsAreActedOn(t *testing.T) {
	md, err := structpb.NewStruct(map[string]any{"team": "search", "tier": 2.0})
	if err != nil {
		t.Fatal(err)
	}
	mdBytes, err := proto.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	raw = protowire.AppendTag(raw, 7, protowire.VarintType) // quota_mode
	raw = protowire.AppendVarint(raw, 1)
	raw = protowire.AppendTag(raw, 8, protowire.BytesType) // metadata
	raw = protowire.AppendBytes(raw, mdBytes)
	r := &rlconf.RateLimitConfig{Name: "new", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "k", RateLimit: limit(7, 3)}, // WEEK, which this build's proto lacks
	}}
	c, err := Compile(config.Options{}, []*anypb.Any{withUnknown(t, r, raw)})
	if err != nil {
		t.Fatal(err)
	}
	got := c.Lookup("d", []config.Entry{{Key: "k", Value: "v"}})
	if got == nil || !got.QuotaMode || got.Unit != config.Week || got.Metadata["team"] != "search" {
		t.Fatalf("rule %+v: want quota_mode, unit week and the metadata", got)
	}
}

func TestUnknownFieldIsRefusedNotDropped(t *testing.T) {
	raw := protowire.AppendTag(nil, 99, protowire.VarintType)
	raw = protowire.AppendVarint(raw, 1)
	r := &rlconf.RateLimitConfig{Name: "x", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{{Key: "k", RateLimit: limit(rlconf.RateLimitUnit_MINUTE, 1)}}}
	_, err := Compile(config.Options{}, []*anypb.Any{withUnknown(t, r, raw)})
	if err == nil || !strings.Contains(err.Error(), "field 99") {
		t.Fatalf("err = %v, want field 99 refused", err)
	}
}

func TestUnknownUnitNumberIsRefused(t *testing.T) {
	r := &rlconf.RateLimitConfig{Name: "x", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{{Key: "k", RateLimit: limit(42, 1)}}}
	if _, err := Compile(config.Options{}, pack(t, r)); err == nil || !strings.Contains(err.Error(), "42") {
		t.Fatalf("err = %v, want unit 42 refused", err)
	}
}

func TestResourceOfAnotherTypeIsRefused(t *testing.T) {
	_, err := Compile(config.Options{}, pack(t, &structpb.Struct{}))
	if err == nil || !strings.Contains(err.Error(), "google.protobuf.Struct") {
		t.Fatalf("err = %v, want the type named", err)
	}
}

func TestTooManyResourcesAreRefusedBeforeDecoding(t *testing.T) {
	// Not valid resources at all: the count is checked first.
	junk := make([]*anypb.Any, MaxResources+1)
	for i := range junk {
		junk[i] = &anypb.Any{TypeUrl: "junk"}
	}
	if _, err := Compile(config.Options{}, junk); err == nil || !strings.Contains(err.Error(), "resources, over the limit") {
		t.Fatalf("err = %v, want the resource count refused", err)
	}
}

// big is a resource whose document is about n bytes.
func big(name string, n int) *rlconf.RateLimitConfig {
	return &rlconf.RateLimitConfig{Name: name, Domain: name, Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "k", Value: strings.Repeat("v", n), RateLimit: limit(rlconf.RateLimitUnit_MINUTE, 1)},
	}}
}

func TestResourceOverTheFileCapIsRefused(t *testing.T) {
	_, err := Compile(config.Options{}, pack(t, big("huge", config.MaxFileBytes)))
	if !errors.Is(err, errTooLarge) {
		t.Fatalf("err = %v, want too large", err)
	}
	if _, err := Compile(config.Options{}, pack(t, big("fits", config.MaxFileBytes-200))); err != nil {
		t.Fatalf("a resource just under the file cap: %v", err)
	}
}

func TestResourcesOverTheTotalCapAreRefused(t *testing.T) {
	n := config.MaxTotalBytes/config.MaxFileBytes + 1
	rs := make([]proto.Message, n)
	for i := range rs {
		rs[i] = big("d"+strings.Repeat("x", i), config.MaxFileBytes-200)
	}
	_, err := Compile(config.Options{}, pack(t, rs...))
	if err == nil || !strings.Contains(err.Error(), "bytes in all") {
		t.Fatalf("err = %v, want the total refused", err)
	}
}

func TestDeeplyNestedResourceIsRefusedAtDecode(t *testing.T) {
	d := &rlconf.RateLimitDescriptor{Key: "k", RateLimit: limit(rlconf.RateLimitUnit_MINUTE, 1)}
	for range maxRecursion {
		d = &rlconf.RateLimitDescriptor{Key: "k", Descriptors: []*rlconf.RateLimitDescriptor{d}}
	}
	_, err := Compile(config.Options{}, pack(t, &rlconf.RateLimitConfig{Name: "deep", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{d}}))
	if err == nil || !strings.Contains(err.Error(), "cannot decode") {
		t.Fatalf("err = %v, want a decode error", err)
	}
}

// BenchmarkCompile compiles a response of one resource of 1,000
// descriptors, each with a nested one: what a config update costs beyond
// the file loader's parse.
func BenchmarkCompile(b *testing.B) {
	r := &rlconf.RateLimitConfig{Name: "bench", Domain: "d"}
	for i := range 1000 {
		r.Descriptors = append(r.Descriptors, &rlconf.RateLimitDescriptor{Key: "tenant", Value: "t" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + fmt.Sprint(i),
			Descriptors: []*rlconf.RateLimitDescriptor{{Key: "user", RateLimit: limit(rlconf.RateLimitUnit_MINUTE, 100)}}})
	}
	a, err := anypb.New(r)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := Document(r)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("xds", func(b *testing.B) {
		b.SetBytes(int64(len(a.Value)))
		for b.Loop() {
			if _, err := Compile(config.Options{}, []*anypb.Any{a}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse-only", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, err := config.Parse("bench", doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A block rule (requests_per_unit 0, which proto3 does not mark present) is
// compiled as the file's requests_per_unit: 0 is, not refused as missing.
func TestBlockRuleWithZeroRequestsPerUnitCompiles(t *testing.T) {
	r := &rlconf.RateLimitConfig{Name: "block", Domain: "d", Descriptors: []*rlconf.RateLimitDescriptor{
		{Key: "k", RateLimit: limit(rlconf.RateLimitUnit_SECOND, 0)},
	}}
	c, err := Compile(config.Options{}, pack(t, r))
	if err != nil {
		t.Fatalf("a block rule is refused: %v", err)
	}
	rule := c.Lookup("d", []config.Entry{{Key: "k", Value: "v"}})
	if rule == nil || rule.Unlimited || rule.RequestsPerUnit != 0 || rule.Unit != config.Second {
		t.Fatalf("k: %+v, want a rule of 0 per second", rule)
	}
}

// Envoy Gateway's translator puts shadow_mode on every descriptor of a
// shadowed rule's path, those without a rate_limit included (its testdata
// global-shadow-mode). envoyproxy/ratelimit accepts it, ignoring the flag
// where there is no rule; so does Sluice, with a warning, instead of a
// NACK that blocked the whole snapshot and every later update.
func TestGatewayShadowModePathCompilesWithWarnings(t *testing.T) {
	rc := &rlconf.RateLimitConfig{
		Name: "default/eg/http", Domain: "default/eg/http",
		Descriptors: []*rlconf.RateLimitDescriptor{{
			Key: "httproute/default/backend/rule/0/match/0", Value: "httproute/default/backend/rule/0/match/0",
			Descriptors: []*rlconf.RateLimitDescriptor{{
				Key: "rule-0-match-0", Value: "rule-0-match-0", ShadowMode: true,
				Descriptors: []*rlconf.RateLimitDescriptor{{
					Key: "masked_remote_address", Value: "0.0.0.0/0", ShadowMode: true,
					RateLimit: limit(rlconf.RateLimitUnit_SECOND, 5),
				}},
			}},
		}},
	}
	c, err := Compile(config.Options{}, pack(t, rc))
	if err != nil {
		t.Fatalf("Envoy Gateway's shadow-mode config: %v, want it compiled (envoyproxy/ratelimit accepts it)", err)
	}
	r := c.Lookup("default/eg/http", []config.Entry{
		{Key: "httproute/default/backend/rule/0/match/0", Value: "httproute/default/backend/rule/0/match/0"},
		{Key: "rule-0-match-0", Value: "rule-0-match-0"},
		{Key: "masked_remote_address", Value: "0.0.0.0/0"},
	})
	if r == nil || r.RequestsPerUnit != 5 || !r.ShadowMode {
		t.Fatalf("the shadowed rule: %+v, want 5 per second in shadow mode", r)
	}
	ws := c.Warnings()
	if len(ws) != 1 || !strings.Contains(ws[0].Error(), "shadow_mode") || !strings.HasPrefix(ws[0].Error(), "xds:default/eg/http:") {
		t.Errorf("warnings %v, want one naming shadow_mode at the resource's place", ws)
	}
}
