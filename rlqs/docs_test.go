package rlqs_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	rlqsfilter "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/rate_limit_quota/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/rlqs"
)

// docBlocks returns the yaml blocks of docs/rlqs.md.
func docBlocks(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("../docs/rlqs.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	parts := strings.Split(string(data), "```yaml\n")
	for _, p := range parts[1:] {
		body, _, ok := strings.Cut(p, "```")
		if !ok {
			t.Fatal("an unclosed yaml block")
		}
		blocks = append(blocks, body)
	}
	return blocks
}

// decodeStrict decodes YAML into m: an unknown field or an Any whose type
// is not linked in is an error, and so is a value Envoy's validation
// rules refuse.
func decodeStrict(t *testing.T, text string, m interface {
	proto.Message
	ValidateAll() error
}) {
	t.Helper()
	var tree any
	if err := yaml.Unmarshal([]byte(text), &tree); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(js, m); err != nil {
		t.Fatalf("not a %T: %v", m, err)
	}
	if err := m.ValidateAll(); err != nil {
		t.Fatalf("%T fails Envoy's validation rules: %v", m, err)
	}
}

// docs/rlqs.md's Envoy config decodes strictly into go-control-plane's
// types, names the doc's domain and Sluice's client header, and its
// bucket maps to the doc's tenant rule.
func TestTheDocsEnvoyFilterConfigDecodesAndMapsToTheDocsRules(t *testing.T) {
	var rulesBlock, clusterBlock, filterBlock string
	for _, b := range docBlocks(t) {
		switch {
		case strings.HasPrefix(b, "domain:"):
			rulesBlock = b
		case strings.HasPrefix(b, "name: sluice"):
			clusterBlock = b
		case strings.HasPrefix(b, "name: envoy.filters.http.rate_limit_quota"):
			filterBlock = b
		}
	}
	if rulesBlock == "" || clusterBlock == "" || filterBlock == "" {
		t.Fatal("docs/rlqs.md lacks the rules, the cluster or the filter")
	}
	decodeStrict(t, clusterBlock, &clusterv3.Cluster{})
	var hf hcmv3.HttpFilter
	decodeStrict(t, filterBlock, &hf)
	var fc rlqsfilter.RateLimitQuotaFilterConfig
	if err := hf.GetTypedConfig().UnmarshalTo(&fc); err != nil {
		t.Fatal(err)
	}
	if err := fc.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	if fc.GetRlqsServer().GetEnvoyGrpc().GetClusterName() != "sluice" || fc.GetRlqsServer().GetInitialMetadata()[0].GetKey() != rlqs.ClientHeader {
		t.Errorf("the filter asks %v with metadata %v, want cluster sluice and %s", fc.GetRlqsServer().GetEnvoyGrpc(), fc.GetRlqsServer().GetInitialMetadata(), rlqs.ClientHeader)
	}
	m := fc.GetBucketMatchers().GetMatcherList().GetMatchers()[0]
	var settings rlqsfilter.RateLimitQuotaBucketSettings
	if err := m.GetOnMatch().GetAction().GetTypedConfig().UnmarshalTo(&settings); err != nil {
		t.Fatal(err)
	}
	if err := settings.ValidateAll(); err != nil {
		t.Fatal(err)
	}
	var input matcherv3.HttpRequestHeaderMatchInput
	if err := m.GetPredicate().GetSinglePredicate().GetInput().GetTypedConfig().UnmarshalTo(&input); err != nil {
		t.Fatal(err)
	}
	d, err := config.Parse("rlqs.md", []byte(rulesBlock))
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != fc.GetDomain() || d.RLQS == nil {
		t.Errorf("the filter's domain %q, the doc's rules' %q (rlqs section %v)", fc.GetDomain(), d.Name, d.RLQS)
	}
	// The bucket id the filter builds for x-tenant: acme.
	id := map[string]string{}
	for k, vb := range settings.GetBucketIdBuilder().GetBucketIdBuilder() {
		var h matcherv3.HttpRequestHeaderMatchInput
		if err := vb.GetCustomValue().GetTypedConfig().UnmarshalTo(&h); err != nil || h.GetHeaderName() != input.GetHeaderName() {
			t.Fatalf("bucket key %s: %v, want the value of %s", k, err, input.GetHeaderName())
		}
		id[k] = "acme"
	}
	r, path := d.LookupBucket(id)
	if r == nil || r.RequestsPerUnit != 100 || len(path) != 1 || path[0] != (config.Entry{Key: "tenant", Value: "acme"}) {
		t.Errorf("the bucket %v maps to %v %v, want the tenant rule of 100 per second", id, r, path)
	}
}
