package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlconf "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/testpki"
	"github.com/sluicehq/sluice/internal/xdstest"
)

// egData is where the Envoy Gateway fixtures are (see its README.md).
const egData = "testdata/envoygateway"

// egAbsentFields are fields Envoy Gateway writes that the go-control-plane
// proto in go.mod does not carry; false, they are not on the wire.
var egAbsentFields = map[string]bool{"quota_mode": true, "value_to_metric": true, "share_threshold": true}

// egNewerUnits are the units Envoy Gateway's newer proto names that the
// one in go.mod lacks, by their numbers in Envoy's RateLimitUnit: an open
// enum, so they go on the wire as these numbers all the same.
var egNewerUnits = map[string]int{"MONTH": 5, "YEAR": 6, "WEEK": 7}

// dropAbsentFalse removes egAbsentFields from v's maps, failing the test
// on one that is not false (it would change the meaning), and writes
// egNewerUnits by number.
func dropAbsentFalse(t *testing.T, file string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if n, ok := egNewerUnits[fmt.Sprint(x)]; ok && k == "unit" {
				v[k] = n
				continue
			}
			if egAbsentFields[k] {
				if x != false {
					t.Fatalf("%s: %s is %v: the proto in go.mod cannot carry it", file, k, x)
				}
				delete(v, k)
				continue
			}
			dropAbsentFalse(t, file, x)
		}
	case []any:
		for _, x := range v {
			dropAbsentFalse(t, file, x)
		}
	}
}

// loadEGConfigs reads the fixture name.ratelimitconfig.yaml into the
// RateLimitConfig protos Envoy Gateway would push, one a YAML document,
// their fields by their proto names, an unknown one refused.
func loadEGConfigs(t *testing.T, name string) []*rlconf.RateLimitConfig {
	t.Helper()
	file := filepath.Join(egData, name+".ratelimitconfig.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*rlconf.RateLimitConfig
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var v any
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		dropAbsentFalse(t, file, v)
		j, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		c := &rlconf.RateLimitConfig{}
		if err := protojson.Unmarshal(j, c); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		out = append(out, c)
	}
}

// egDeploymentEnv returns the environment of Envoy Gateway's rate limit
// Deployment (deployment-env.yaml), with the values of swap in place of
// the cluster's (each must name one of its variables).
func egDeploymentEnv(t *testing.T, swap map[string]string) map[string]string {
	t.Helper()
	file := filepath.Join(egData, "deployment-env.yaml")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var env []struct{ Name, Value string }
	if err := yaml.Unmarshal(b, &env); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	set := map[string]string{}
	for _, e := range env {
		v := e.Value
		if s, ok := swap[e.Name]; ok {
			v = s
		}
		set[e.Name] = v
	}
	for n := range swap {
		if _, ok := set[n]; !ok {
			t.Fatalf("%s has no %s to swap", file, n)
		}
	}
	return set
}

// exportPrelude is the shell command that exports env, each value quoted.
func exportPrelude(env map[string]string) string {
	var b strings.Builder
	b.WriteString("export")
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, " %s='%s'", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	return b.String()
}

// egProbe is one descriptor Envoy sends for a request, calls times, in
// domain (first-listener when empty), and how envoyproxy/ratelimit answers
// it: the limit GetLimit finds for it (0: none, so OK with no current
// limit) and its unit (SECOND when unset), in shadow mode or not, and the
// hits its key already has in this window.
type egProbe struct {
	what    string
	domain  string
	entries [][2]string
	calls   int
	limit   uint32
	unit    pb.RateLimitResponse_RateLimit_Unit
	shadow  bool
	prior   uint32
}

// want is envoyproxy/ratelimit's descriptor status for the probe's call i
// (from 1), as its GetResponseDescriptorStatus writes it: within the
// limit OK with what remains, over it OVER_LIMIT with none (OK in shadow
// mode), with no limit OK with neither.
func (p egProbe) want(i int) (code pb.RateLimitResponse_Code, limit, remaining uint32) {
	if p.limit == 0 {
		return pb.RateLimitResponse_OK, 0, 0
	}
	n := uint64(p.prior) + uint64(i)
	switch {
	case n <= uint64(p.limit):
		return pb.RateLimitResponse_OK, p.limit, uint32(uint64(p.limit) - n)
	case p.shadow:
		return pb.RateLimitResponse_OK, p.limit, 0
	default:
		return pb.RateLimitResponse_OVER_LIMIT, p.limit, 0
	}
}

// rooted is the entries root=root then kv pairs.
func rooted(root string, kv ...string) [][2]string {
	return append([][2]string{{root, root}}, route(kv...)[1:]...)
}

// route prefixes the route's descriptor entry to kv pairs.
func route(kv ...string) [][2]string {
	out := [][2]string{{"first-route", "first-route"}}
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, [2]string{kv[i], kv[i+1]})
	}
	return out
}

// egCases are Envoy Gateway's translator cases, each with the descriptors
// Envoy sends for matching requests and for requests a rule does not
// match, and the answers envoyproxy/ratelimit's GetLimit gives them: a
// limit only where the request's last entry reaches a descriptor with a
// rate_limit (by key and value, else by key alone for a config value of
// ""), none for a shorter or longer descriptor or one whose value is not
// in the config.
var egCases = []struct {
	name   string
	probes []egProbe
}{
	{"global-shadow-mode", []egProbe{
		{what: "all three headers and the CIDR match", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1", "rule-0-match-2", "rule-0-match-2", "masked_remote_address", "0.0.0.0/0"), calls: 7, limit: 5, shadow: true},
		{what: "x-org-id does not match (the route's other rule shape)", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1", "masked_remote_address", "0.0.0.0/0"), calls: 2},
	}},
	{"header-and-cidr-matches", []egProbe{
		{what: "all three headers and the CIDR match", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1", "rule-0-match-2", "rule-0-match-2", "masked_remote_address", "0.0.0.0/0"), calls: 7, limit: 5},
		{what: "x-org-id does not match", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1", "masked_remote_address", "0.0.0.0/0"), calls: 2},
		{what: "the route only", entries: route(), calls: 1},
	}},
	{"multiple-matches", []egProbe{
		{what: "both header matches", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1"), calls: 6, limit: 5},
		{what: "the first match only (shorter than the rule)", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 1},
		{what: "an entry past the rule (longer)", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1", "x-extra", "1"), calls: 1},
	}},
	{"masked-remote-address-match", []egProbe{
		{what: "a client in 192.168.0.0/16", entries: route("masked_remote_address", "192.168.0.0/16"), calls: 6, limit: 5},
		{what: "another CIDR's value", entries: route("masked_remote_address", "10.0.0.0/8"), calls: 1},
	}},
	{"distinct-remote-address-match", []egProbe{
		{what: "192.168.1.1", entries: route("masked_remote_address", "192.168.0.0/16", "remote_address", "192.168.1.1"), calls: 6, limit: 5},
		{what: "192.168.1.2, its own counter", entries: route("masked_remote_address", "192.168.0.0/16", "remote_address", "192.168.1.2"), calls: 2, limit: 5},
		{what: "192.168.1.1 again, still over", entries: route("masked_remote_address", "192.168.0.0/16", "remote_address", "192.168.1.1"), calls: 1, limit: 5, prior: 6},
		{what: "outside the CIDR", entries: route("masked_remote_address", "10.0.0.0/8", "remote_address", "10.0.0.1"), calls: 1},
	}},
	{"distinct-match", []egProbe{
		{what: "x-user-id alice", entries: route("rule-0-match-0", "alice"), calls: 6, limit: 5},
		{what: "x-user-id bob, his own counter", entries: route("rule-0-match-0", "bob"), calls: 1, limit: 5},
	}},
	{"multiple-rules", []egProbe{
		{what: "x-user-id one: rule 0", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "x-user-id two: rule 1, 4294967295 a second", entries: route("rule-1-match-0", "rule-1-match-0"), calls: 3, limit: 4294967295},
		{what: "the route only", entries: route(), calls: 1},
	}},
	{"global-shared-multiple-shared-policies", []egProbe{
		{what: "the route's own rule", entries: rooted("fourth-route", "rule-0-match-0", "rule-0-match-0"), calls: 11, limit: 10},
		{what: "shared policy 1", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "shared policy 2", domain: "test-namespace/test-policy-2", entries: rooted("test-namespace/test-policy-2/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 11, limit: 10},
		{what: "policy 2's descriptor in policy 1's domain", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-2/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 1},
		{what: "a domain not pushed", domain: "test-namespace/test-policy-3", entries: rooted("test-namespace/test-policy-3/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 1},
	}},
	{"multiple-masked-remote-address-match-with-same-cidr", []egProbe{
		{what: "192.168.0.10 on first-route, 15 an hour", entries: route("masked_remote_address", "192.168.0.10/32"), calls: 16, limit: 15, unit: pb.RateLimitResponse_RateLimit_HOUR},
		{what: "the same client on second-route, its own 300 an hour", entries: rooted("second-route", "masked_remote_address", "192.168.0.10/32"), calls: 2, limit: 300, unit: pb.RateLimitResponse_RateLimit_HOUR},
		{what: "another client's /32", entries: route("masked_remote_address", "192.168.0.11/32"), calls: 1},
	}},
	{"method-match", []egProbe{
		{what: "rule 0's method", entries: route("rule-0-method", "rule-0-method"), calls: 6, limit: 5},
		{what: "rule 1's method, 50 a second", entries: route("rule-1-method", "rule-1-method"), calls: 3, limit: 50},
		{what: "another method: the route only", entries: route(), calls: 1},
	}},
	{"path-match", []egProbe{
		{what: "rule 0's path", entries: route("rule-0-path", "rule-0-path"), calls: 6, limit: 5},
		{what: "rule 1's path, its own counter", entries: route("rule-1-path", "rule-1-path"), calls: 2, limit: 5},
	}},
	{"query-parameters-match", []egProbe{
		{what: "both query parameters", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1"), calls: 6, limit: 5},
		{what: "the first only (shorter than the rule)", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 1},
	}},
	{"multiple-domains", []egProbe{
		{what: "second-route's rule in the listener's domain", entries: rooted("second-route", "rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "the shared policy in its own domain", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "the shared policy's descriptor in the listener's domain", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 1},
	}},
	{"ratelimit-sourceip-invert", []egProbe{
		{what: "a client outside 192.168.0.0/24", entries: route("masked_remote_address", "invert:192.168.0.0/24"), calls: 6, limit: 5},
		{what: "the CIDR without invert:", entries: route("masked_remote_address", "192.168.0.0/24"), calls: 1},
	}},
	{"empty-header-matches", []egProbe{
		{what: "every request of the route", entries: route("rule-0-match--1", "rule-0-match--1"), calls: 6, limit: 5},
	}},
	{"multiple-all-match", []egProbe{
		{what: "every match", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1", "rule-0-match-2", "rule-0-match-2", "rule-0-method", "rule-0-method", "rule-0-path", "rule-0-path", "masked_remote_address", "0.0.0.0/0"), calls: 6, limit: 5},
		{what: "all but the path", entries: route("rule-0-match-0", "rule-0-match-0", "rule-0-match-1", "rule-0-match-1", "rule-0-match-2", "rule-0-match-2", "rule-0-method", "rule-0-method", "masked_remote_address", "0.0.0.0/0"), calls: 1},
	}},
	{"multiple-routes", []egProbe{
		{what: "first-route, 5 a second", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "second-route, its own 10 a second", entries: rooted("second-route", "rule-0-match-0", "rule-0-match-0"), calls: 11, limit: 10},
	}},
	{"global-shared-distinct-match", []egProbe{
		{what: "x-user-id alice", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "alice"), calls: 6, limit: 5},
		{what: "x-user-id bob, his own counter", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "bob"), calls: 1, limit: 5},
	}},
	{"multiple-shared-and-unshared", []egProbe{
		{what: "unshared rule 0", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "unshared rule 1", entries: route("rule-1-match-0", "rule-1-match-0"), calls: 2, limit: 5},
		{what: "shared rule 0", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "shared rule 2", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/2", "rule-1-match-0", "rule-1-match-0"), calls: 2, limit: 5},
		{what: "shared rule 1 (not shared: not in the domain)", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/1", "rule-1-match-0", "rule-1-match-0"), calls: 1},
	}},
	{"multiple-shared-ratelimit-rules", []egProbe{
		{what: "the route's rule, 3 a second", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 4, limit: 3},
		{what: "shared rule 0, 1 a second", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 2, limit: 1},
		{what: "shared rule 1, 2 a second", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/1", "rule-1-match-0", "rule-1-match-0"), calls: 3, limit: 2},
	}},
	{"multiple-listeners-distinct-match", []egProbe{
		{what: "alice on the first listener", entries: route("rule-0-match-0", "alice"), calls: 6, limit: 5},
		{what: "alice on the second listener, its own counter", domain: "second-listener", entries: route("rule-0-match-0", "alice"), calls: 2, limit: 5},
	}},
	{"multiple-listeners-shared-distinct-match", []egProbe{
		{what: "alice under the unshared rule", entries: route("rule-0-match-0", "alice"), calls: 6, limit: 5},
		{what: "alice under the shared rule", domain: "test-namespace/test-policy-2", entries: rooted("test-namespace/test-policy-2/rule/0", "rule-0-match-0", "alice"), calls: 3, limit: 5},
		{what: "alice under the shared rule from the second listener: the same counter", domain: "test-namespace/test-policy-2", entries: rooted("test-namespace/test-policy-2/rule/0", "rule-0-match-0", "alice"), calls: 3, limit: 5, prior: 3},
	}},
	{"multiple-global-shared-distinct-match", []egProbe{
		{what: "rule 0, alice", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "alice"), calls: 6, limit: 5},
		{what: "rule 1, alice", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/1", "rule-1-match-0", "alice"), calls: 2, limit: 5},
		{what: "rule 2, bob", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/2", "rule-2-match-0", "bob"), calls: 2, limit: 5},
		{what: "rule 2's key under rule 0", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-2-match-0", "bob"), calls: 1},
	}},
	{"value-match", []egProbe{
		{what: "the header's value matches", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "another value under the rule's key", entries: route("rule-0-match-0", "other"), calls: 1},
	}},
	{"distinct-match-overrides", []egProbe{
		{what: "client-a, its own 15 a second", entries: route("rule-0-match-0", "client-a"), calls: 16, limit: 15},
		{what: "client-b, its own 20", entries: route("rule-0-match-0", "client-b"), calls: 3, limit: 20},
		{what: "client-c, its own 5", entries: route("rule-0-match-0", "client-c"), calls: 6, limit: 5},
		{what: "dave, the key's 10", entries: route("rule-0-match-0", "dave"), calls: 11, limit: 10},
		{what: "erin, the key's 10 on a counter of her own", entries: route("rule-0-match-0", "erin"), calls: 2, limit: 10},
	}},
	{"distinct-match-overrides-method", []egProbe{
		{what: "client-a and the method, 15", entries: route("rule-0-match-0", "client-a", "rule-0-method", "rule-0-method"), calls: 16, limit: 15},
		{what: "bob and the method, 10", entries: route("rule-0-match-0", "bob", "rule-0-method", "rule-0-method"), calls: 11, limit: 10},
		{what: "client-a without the method (shorter)", entries: route("rule-0-match-0", "client-a"), calls: 1},
	}},
	{"distinct-match-overrides-path", []egProbe{
		{what: "client-a and the path, 15", entries: route("rule-0-match-0", "client-a", "rule-0-path", "rule-0-path"), calls: 16, limit: 15},
		{what: "bob and the path, 10", entries: route("rule-0-match-0", "bob", "rule-0-path", "rule-0-path"), calls: 11, limit: 10},
		{what: "bob and the method: no such level", entries: route("rule-0-match-0", "bob", "rule-0-method", "rule-0-method"), calls: 1},
	}},
	{"distinct-match-overrides-method-path", []egProbe{
		{what: "client-b, the method and the path, 20", entries: route("rule-0-match-0", "client-b", "rule-0-method", "rule-0-method", "rule-0-path", "rule-0-path"), calls: 21, limit: 20},
		{what: "client-a, the method and the path, 15", entries: route("rule-0-match-0", "client-a", "rule-0-method", "rule-0-method", "rule-0-path", "rule-0-path"), calls: 3, limit: 15},
		{what: "carol, the method and the path, 10", entries: route("rule-0-match-0", "carol", "rule-0-method", "rule-0-method", "rule-0-path", "rule-0-path"), calls: 11, limit: 10},
		{what: "client-b and the method only (shorter)", entries: route("rule-0-match-0", "client-b", "rule-0-method", "rule-0-method"), calls: 1},
	}},
	{"distinct-query-match-overrides", []egProbe{
		{what: "alice, her own 15", entries: route("rule-0-match-0", "alice"), calls: 16, limit: 15},
		{what: "bob, the key's 10", entries: route("rule-0-match-0", "bob"), calls: 11, limit: 10},
	}},
	{"distinct-remote-address-match-overrides", []egProbe{
		{what: "192.168.0.10, its own 15", entries: route("masked_remote_address", "192.168.0.0/16", "remote_address", "192.168.0.10"), calls: 16, limit: 15},
		{what: "192.168.0.11, the key's 10", entries: route("masked_remote_address", "192.168.0.0/16", "remote_address", "192.168.0.11"), calls: 11, limit: 10},
		{what: "outside the CIDR", entries: route("masked_remote_address", "10.0.0.0/8", "remote_address", "10.0.0.10"), calls: 1},
	}},
	{"global-shared-distinct-match-overrides", []egProbe{
		{what: "client-b, its own 20", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "client-b"), calls: 21, limit: 20},
		{what: "client-a, its own 15", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "client-a"), calls: 2, limit: 15},
		{what: "zed, the key's 10", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "zed"), calls: 11, limit: 10},
		{what: "client-b in the listener's domain", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-0-match-0", "client-b"), calls: 1},
	}},
	{"global-shared-named-rule", []egProbe{
		{what: "alice under the rule's name", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/by-user", "rule-match-0", "alice"), calls: 6, limit: 5},
		{what: "bob, his own counter", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/by-user", "rule-match-0", "bob"), calls: 2, limit: 5},
		{what: "the rule by its index: not in the config", domain: "test-namespace/test-policy-1", entries: rooted("test-namespace/test-policy-1/rule/0", "rule-match-0", "alice"), calls: 1},
	}},
	{"global-detailed-metric", []egProbe{
		{what: "alice", entries: route("rule-0-match-0", "alice"), calls: 6, limit: 5},
		{what: "bob, his own counter", entries: route("rule-0-match-0", "bob"), calls: 2, limit: 5},
	}},
	{"global-shared-multiple-routes", []egProbe{
		{what: "the listener's shared limit", entries: rooted("global-limit", "rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "first-route's own, another counter", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5},
		{what: "second-route's own 10", entries: rooted("second-route", "rule-0-match-0", "rule-0-match-0"), calls: 11, limit: 10},
	}},
	{"shared-and-unshared", []egProbe{
		{what: "the shared policy, 3 an hour", domain: "default/policy-for-route", entries: rooted("default/policy-for-route/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 4, limit: 3, unit: pb.RateLimitResponse_RateLimit_HOUR},
		{what: "httproute-1's own, 3 an hour", domain: "envoy-gateway/gateway-1/http", entries: rooted("httproute/default/httproute-1/rule/0/match/0/gateway_envoyproxy_io", "rule-0-match-0", "rule-0-match-0"), calls: 4, limit: 3, unit: pb.RateLimitResponse_RateLimit_HOUR},
		{what: "httproute-2's own, another counter", domain: "envoy-gateway/gateway-1/http", entries: rooted("httproute/default/httproute-2/rule/0/match/0/gateway_envoyproxy_io", "rule-0-match-0", "rule-0-match-0"), calls: 2, limit: 3, unit: pb.RateLimitResponse_RateLimit_HOUR},
		{what: "the shared policy's descriptor in the gateway's domain", domain: "envoy-gateway/gateway-1/http", entries: rooted("default/policy-for-route/rule/0", "rule-0-match-0", "rule-0-match-0"), calls: 1},
	}},
	{"month-year-rule", []egProbe{
		{what: "first-route, 5 a month", entries: route("rule-0-match-0", "rule-0-match-0"), calls: 6, limit: 5, unit: pb.RateLimitResponse_RateLimit_MONTH},
		{what: "second-route, 1 a year", entries: rooted("second-route", "rule-0-match-0", "rule-0-match-0"), calls: 2, limit: 1, unit: pb.RateLimitResponse_RateLimit_YEAR},
	}},
}

// Envoy Gateway's own resources, served to a `sluice serve` started with
// Envoy Gateway's rate limit Deployment environment (xDS over mutual TLS
// from a go-control-plane server, Redis, a TLS gRPC listener), answer as
// envoyproxy/ratelimit answers them: each translator case is pushed as
// Envoy Gateway pushes it, ACKed, and the descriptors Envoy sends for
// matching and non-matching requests get envoyproxy/ratelimit's codes,
// limits, remaining counts and window ends (duration_until_reset, in whole
// seconds), call by call.
//
// serve runs as a process of its own, with the Deployment's environment
// as its own, so that the test runs beside others: it lasts a second a
// case.
func TestServeAnswersEnvoyGatewayConfigsAsRatelimitDoes(t *testing.T) {
	t.Parallel() // waits on processes and the clock; touches no process-wide state
	// About a second a case (a window of its own), three allowed each on
	// a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(egCases))*3*time.Second)
	defer cancel()
	xpki := xdstest.NewPKI(t)
	srv := xdstest.Start(t, "127.0.0.1:0", xpki.ServerCreds())
	redis := redistest.StartServer(t)
	// The RLS listener's certificate, as Envoy Gateway mounts it.
	dir := t.TempDir()
	ca := testpki.NewCA(t, "rls CA")
	rlsCert, rlsKey := ca.Issue(t, "sluice.test", false, "sluice.test").WriteFiles(t, dir, "rls")
	env := egDeploymentEnv(t, map[string]string{
		"CONFIG_GRPC_XDS_SERVER_URL":        srv.Addr,
		"CONFIG_GRPC_XDS_CLIENT_TLS_CERT":   xpki.ClientCert,
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY":    xpki.ClientKey,
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": xpki.CAFile,
		"GRPC_SERVER_TLS_CERT":              rlsCert,
		"GRPC_SERVER_TLS_KEY":               rlsKey,
		"GRPC_SERVER_TLS_CA_CERT":           ca.WriteFile(t, dir, "ca.pem"),
		"REDIS_URL":                         redis.Addr,
		"PROMETHEUS_ADDR":                   "127.0.0.1:0",
		"PROMETHEUS_MAPPER_YAML":            filepath.Join(dir, "absent-mapper.yaml"),
	})
	// FORCE_START_WITHOUT_INITIAL_CONFIG: serves before the first push.
	s := startProcess(t, exportPrelude(env), "serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0")
	cc := dial(t, s.grpc, credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "sluice.test"}))
	defer cc.Close()
	rls := pb.NewRateLimitServiceClient(cc)

	i := 0
	for n, c := range egCases {
		version := fmt.Sprintf("v%d", n+1)
		srv.Push(t, env["CONFIG_GRPC_XDS_NODE_ID"], version, loadEGConfigs(t, c.name)...)
		var r xdstest.Request
		r, i = srv.WaitRequest(ctx, t, i, func(r xdstest.Request) bool { return xdstest.IsACK(r, version) || xdstest.IsNACK(r) })
		if xdstest.IsNACK(r) {
			t.Errorf("%s: NACKed: %s", c.name, r.GetErrorDetail().GetMessage())
			continue
		}
		i++
		// The limits are whole seconds of the wall clock (serve's fixed
		// windows, as envoyproxy/ratelimit's): each case runs in a window
		// of its own, again in the next one if its calls straddled two
		// (up to 10 times: beside the package's other tests on a loaded
		// machine, 3 straddled in a row). A case without a per-second
		// limit runs once: its hour, month or year is not over at the
		// next second, so a second run would meet the first run's counts.
		var errs []string
		for attempt := 0; attempt < 10; attempt++ {
			start := nextSecond(t)
			errs = egRun(ctx, rls, c.probes)
			if !egPerSecond(c.probes) || time.Now().Truncate(time.Second).Equal(start) {
				break
			}
			errs = []string{"straddled two windows"}
		}
		for _, e := range errs {
			t.Errorf("%s: %s", c.name, e)
		}
	}
}

// egPerSecond reports whether a probe of probes has a limit per second.
func egPerSecond(probes []egProbe) bool {
	for _, p := range probes {
		if p.limit != 0 && (p.unit == pb.RateLimitResponse_RateLimit_UNKNOWN || p.unit == pb.RateLimitResponse_RateLimit_SECOND) {
			return true
		}
	}
	return false
}

// egResetSeconds is the first status's duration_until_reset rounded up to
// whole seconds ("none" when it has none). envoyproxy/ratelimit counts
// whole seconds (the window's end less the current second); Sluice gives
// the exact time to the same end, so rounded up they agree.
func egResetSeconds(resp *pb.RateLimitResponse) string {
	st := resp.GetStatuses()
	if len(st) == 0 || st[0].GetDurationUntilReset() == nil {
		return "none"
	}
	d := st[0].GetDurationUntilReset().AsDuration()
	return fmt.Sprintf("%ds", int64((d+time.Second-1)/time.Second))
}

// egUnitSeconds are envoyproxy/ratelimit's window lengths (UnitToDivider)
// for the units the cases use.
var egUnitSeconds = map[pb.RateLimitResponse_RateLimit_Unit]int64{
	pb.RateLimitResponse_RateLimit_SECOND: 1,
	pb.RateLimitResponse_RateLimit_HOUR:   60 * 60,
	pb.RateLimitResponse_RateLimit_MONTH:  60 * 60 * 24 * 30,
	pb.RateLimitResponse_RateLimit_YEAR:   60 * 60 * 24 * 365,
}

// nextSecond waits for the next whole second of the wall clock (at most
// one second: the window the next calls count in) and returns it.
func nextSecond(t *testing.T) time.Time {
	t.Helper()
	next := time.Now().Truncate(time.Second).Add(time.Second)
	time.Sleep(time.Until(next) + 2*time.Millisecond) // a window boundary of the real clock serve reads
	return next
}

// egRun makes the probes' calls in order and returns how the answers
// differ from envoyproxy/ratelimit's.
func egRun(ctx context.Context, rls pb.RateLimitServiceClient, probes []egProbe) []string {
	var errs []string
	for _, p := range probes {
		d := &rlpb.RateLimitDescriptor{}
		for _, e := range p.entries {
			d.Entries = append(d.Entries, &rlpb.RateLimitDescriptor_Entry{Key: e[0], Value: e[1]})
		}
		domain, unit := p.domain, p.unit
		if domain == "" {
			domain = "first-listener"
		}
		if unit == pb.RateLimitResponse_RateLimit_UNKNOWN {
			unit = pb.RateLimitResponse_RateLimit_SECOND
		}
		var got, want []string
		for call := 1; call <= p.calls; call++ {
			before := time.Now().Unix()
			resp, err := rls.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: domain, Descriptors: []*rlpb.RateLimitDescriptor{d}})
			if err != nil {
				return append(errs, fmt.Sprintf("%s: call %d: %v", p.what, call, err))
			}
			code, limit, remaining := p.want(call)
			reset := "none"
			if limit != 0 {
				// CalculateReset: the unit's seconds less now modulo them
				// (so windows of 30 and 365 days from the epoch for MONTH
				// and YEAR), at the second before or after the call.
				div := egUnitSeconds[unit]
				reset = fmt.Sprintf("%ds", div-before%div)
				if after := time.Now().Unix(); after != before && egResetSeconds(resp) == fmt.Sprintf("%ds", div-after%div) {
					reset = fmt.Sprintf("%ds", div-after%div)
				}
			}
			want = append(want, fmt.Sprintf("%v/%v limit=%d remaining=%d reset=%s", code, code, limit, remaining, reset))
			st := resp.GetStatuses()
			if len(st) != 1 {
				got = append(got, fmt.Sprintf("%d statuses", len(st)))
				continue
			}
			gotLimit := st[0].GetCurrentLimit()
			if gotLimit != nil && gotLimit.GetUnit() != unit {
				got = append(got, "unit "+gotLimit.GetUnit().String())
				continue
			}
			gotReset := egResetSeconds(resp)
			got = append(got, fmt.Sprintf("%v/%v limit=%d remaining=%d reset=%s", resp.GetOverallCode(), st[0].GetCode(), gotLimit.GetRequestsPerUnit(), st[0].GetLimitRemaining(), gotReset))
		}
		if strings.Join(got, "; ") != strings.Join(want, "; ") {
			errs = append(errs, fmt.Sprintf("%s (%d calls):\n got  %s\n want %s", p.what, p.calls, strings.Join(got, "; "), strings.Join(want, "; ")))
		}
	}
	return errs
}
