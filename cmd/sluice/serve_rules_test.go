package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicehq/sluice/internal/envflag"
	"github.com/sluicehq/sluice/internal/redistest"
)

// rulesStores are the stores the rule tests run on: memory, and a real
// Redis (skipped loudly without redis-server unless SLUICE_REQUIRE_REDIS=1).
var rulesStores = []struct {
	name string
	args func(t *testing.T) []string
}{
	{"memory", func(*testing.T) []string { return nil }},
	{"redis", func(t *testing.T) []string { return []string{"-store", "redis://" + redistest.Single(t).Addr} }},
}

// serveRules runs sluice serve with the config cfg on each store, with
// the environment env set, and calls f with its URL.
func serveRules(t *testing.T, cfg string, env map[string]string, f func(t *testing.T, url string)) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, path, cfg)
	for k, v := range env {
		t.Setenv(k, v)
	}
	for _, store := range rulesStores {
		t.Run(store.name, func(t *testing.T) {
			s := launch(t, append([]string{"-config", path}, store.args(t)...)...)
			f(t, s.url)
		})
	}
}

// inOneWindow runs steps with a key prefix of its own (a fresh -prefix is
// not needed: values carry it), again when a window of length w ended
// while they ran, since the rules are fixed windows on the wall clock.
func inOneWindow(t *testing.T, w time.Duration, steps func(tag string) bool) {
	t.Helper()
	for attempt := 0; attempt < 3; attempt++ {
		start := time.Now().Truncate(w)
		tag := fmt.Sprintf("%d-%d", time.Now().UnixNano(), attempt)
		ok := steps(tag)
		if time.Now().Truncate(w).Equal(start) {
			if !ok {
				t.FailNow()
			}
			return
		}
	}
	t.Fatalf("three attempts each crossed a %v boundary", w)
}

// rlsBody is a RateLimitRequest in protojson of domain d whose
// descriptors are given as JSON objects.
func rlsBody(descs ...string) string {
	return `{"domain":"d","descriptors":[` + strings.Join(descs, ",") + `]}`
}

// entry is a descriptor of one entry, with extra fields (such as
// "hits_addend":2) after it.
func entry(key, value string, extra ...string) string {
	s := `{"entries":[{"key":"` + key + `","value":"` + value + `"}]`
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

// share_threshold through the binary: values under one wildcard share
// one counter (2 per hour for files/a, files/b and files/c together).
func TestServeShareThreshold(t *testing.T) {
	cfg := "domain: d\ndescriptors:\n  - key: files\n    value: files/*\n    share_threshold: true\n" +
		"    descriptors:\n      - key: run\n        rate_limit: {unit: hour, requests_per_unit: 2}\n"
	serveRules(t, cfg, nil, func(t *testing.T, url string) {
		inOneWindow(t, time.Hour, func(tag string) bool {
			ok := true
			for i, v := range []string{"files/a.pdf", "files/b.csv", "files/c.txt"} {
				body := `{"domain":"d","descriptors":[{"entries":[{"key":"files","value":"` + v + `"},{"key":"run","value":"` + tag + `"}]}]}`
				want := pb.RateLimitResponse_OK
				if i == 2 {
					want = pb.RateLimitResponse_OVER_LIMIT
				}
				if got := rlsPost(t, url, body).GetOverallCode(); got != want {
					t.Errorf("hit %d (%s): %v, want %v: the values share 2 per hour", i+1, v, got, want)
					ok = false
				}
			}
			return ok
		})
	})
}

const quotaServeCfg = `domain: d
descriptors:
  - key: q1
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: plain
    rate_limit: {unit: hour, requests_per_unit: 1}
`

// quota_mode through the binary: a quota descriptor over its limit beside
// one within leaves the request OK (its own status OVER_LIMIT); with every
// quota exhausted the request is OVER_LIMIT.
func TestServeQuotaMode(t *testing.T) {
	serveRules(t, quotaServeCfg, nil, func(t *testing.T, url string) {
		inOneWindow(t, time.Hour, func(tag string) bool {
			rlsPost(t, url, rlsBody(entry("q1", tag)))
			resp := rlsPost(t, url, rlsBody(entry("q1", tag), entry("q2", tag)))
			ok := true
			if resp.GetOverallCode() != pb.RateLimitResponse_OK || resp.GetStatuses()[0].GetCode() != pb.RateLimitResponse_OVER_LIMIT {
				t.Errorf("q1 exhausted, q2 not: overall %v, q1 %v; want OK and OVER_LIMIT", resp.GetOverallCode(), resp.GetStatuses()[0].GetCode())
				ok = false
			}
			resp = rlsPost(t, url, rlsBody(entry("q1", tag), entry("q2", tag)))
			if resp.GetOverallCode() != pb.RateLimitResponse_OVER_LIMIT {
				t.Errorf("every quota exhausted: %v, want OVER_LIMIT", resp.GetOverallCode())
				ok = false
			}
			return ok
		})
	})
}

// QUOTA_MODE=true through the binary: every descriptor is a quota, so a
// request with a descriptor that matches no rule is never OVER_LIMIT,
// while one whose only descriptor is exhausted is.
func TestServeGlobalQuotaModeUnmatched(t *testing.T) {
	serveRules(t, quotaServeCfg, map[string]string{"QUOTA_MODE": "true"}, func(t *testing.T, url string) {
		inOneWindow(t, time.Hour, func(tag string) bool {
			rlsPost(t, url, rlsBody(entry("plain", tag)))
			ok := true
			if got := rlsPost(t, url, rlsBody(entry("plain", tag))).GetOverallCode(); got != pb.RateLimitResponse_OVER_LIMIT {
				t.Errorf("the only descriptor exhausted: %v, want OVER_LIMIT", got)
				ok = false
			}
			if got := rlsPost(t, url, rlsBody(entry("plain", tag), entry("nomatch", "x"))).GetOverallCode(); got != pb.RateLimitResponse_OK {
				t.Errorf("beside a descriptor without a rule: %v, want OK", got)
				ok = false
			}
			return ok
		})
	})
}

// metadata in, dynamic_metadata out (RESPONSE_DYNAMIC_METADATA=true), in
// envoyproxy/ratelimit's shape, merged over the admitted descriptors.
func TestServeDynamicMetadata(t *testing.T) {
	cfg := `domain: d
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 5}
    metadata: {team: payments, limits: {user: true}}
  - key: blocked
    rate_limit: {unit: hour, requests_per_unit: 0}
    metadata: {team: nobody, limits: {blocked: true}}
`
	serveRules(t, cfg, map[string]string{"RESPONSE_DYNAMIC_METADATA": "true"}, func(t *testing.T, url string) {
		resp := rlsPost(t, url, `{"domain":"d","hits_addend":1,"descriptors":[`+entry("user", "bob", `"hits_addend":2`)+","+entry("blocked", "x")+`]}`)
		got, err := protojson.Marshal(resp.GetDynamicMetadata())
		if err != nil {
			t.Fatal(err)
		}
		want := `{"descriptors":[{"entries":["user=bob"],"hitsAddend":2},{"entries":["blocked=x"]}],"domain":"d","hitsAddend":1,` +
			`"metadata":{"limits":{"user":true},"team":"payments"}}`
		if canonJSON(t, got) != canonJSON(t, []byte(want)) {
			t.Errorf("dynamic_metadata\n got %s\nwant %s", got, want)
		}
	})
}

// Several limits on one descriptor through the binary: a hit that the
// hourly limit refuses is refunded from the per-minute one, so the next
// hit fits both (without the refund the per-minute limit would refuse
// it); statuses name the limit that refused, else the tightest.
func TestServeSeveralLimits(t *testing.T) {
	cfg := `domain: d
descriptors:
  - key: user
    rate_limits:
      - {name: per_minute, unit: minute, requests_per_unit: 3}
      - {name: per_hour, unit: hour, requests_per_unit: 2}
`
	serveRules(t, cfg, nil, func(t *testing.T, url string) {
		inOneWindow(t, time.Minute, func(tag string) bool {
			ok := true
			check := func(step string, resp *pb.RateLimitResponse, code pb.RateLimitResponse_Code, name string, remaining uint32) {
				st := resp.GetStatuses()[0]
				if resp.GetOverallCode() != code || st.GetCurrentLimit().GetName() != name || st.GetLimitRemaining() != remaining {
					t.Errorf("%s: %v by %q remaining %d, want %v by %q remaining %d", step, resp.GetOverallCode(),
						st.GetCurrentLimit().GetName(), st.GetLimitRemaining(), code, name, remaining)
					ok = false
				}
			}
			check("hit 1", rlsPost(t, url, rlsBody(entry("user", tag))), pb.RateLimitResponse_OK, "per_hour", 1)
			check("hit of 2", rlsPost(t, url, rlsBody(entry("user", tag, `"hits_addend":2`))), pb.RateLimitResponse_OVER_LIMIT, "per_hour", 0)
			check("hit 3", rlsPost(t, url, rlsBody(entry("user", tag))), pb.RateLimitResponse_OK, "per_hour", 0)
			return ok
		})
	})
}

// rate_limit and rate_limits on one descriptor is an error at load that
// names the file and line.
func TestCheckRefusesRateLimitWithRateLimits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, path, "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1}\n    rate_limits:\n      - {unit: day, requests_per_unit: 10}\n")
	var out, errb bytes.Buffer
	if code := run([]string{"check", path}, &out, &errb); code != 1 || !strings.Contains(errb.String(), path+":3:5: config: descriptor has both rate_limit and rate_limits") {
		t.Errorf("check: exit %d, stderr %q; want 1 and the error at %s:3:5", code, errb.String(), path)
	}
}

// canonJSON re-encodes a JSON document with sorted keys.
func canonJSON(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// MERGE_DOMAIN_CONFIG=true through the binary: two files of one domain
// are served as one (without it serve refuses to start).
func TestServeMergeDomainConfig(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: hour, requests_per_unit: 0}\n")
	writeFile(t, filepath.Join(dir, "b.yaml"), "domain: d\ndescriptors:\n  - key: b\n    rate_limit: {unit: hour, requests_per_unit: 0}\n")
	var out, errb bytes.Buffer
	if code := runServe(t.Context(), []string{"-config", dir, "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb); code == 0 || !strings.Contains(errb.String(), `duplicate domain "d"`) {
		t.Errorf("without MERGE_DOMAIN_CONFIG: exit %d, stderr %q; want a duplicate domain error", code, errb.String())
	}
	t.Setenv("MERGE_DOMAIN_CONFIG", "true")
	s := launch(t, "-config", dir)
	for _, k := range []string{"a", "b"} {
		if got := rlsPost(t, s.url, rlsBody(entry(k, "x"))).GetOverallCode(); got != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("%s.yaml's rule (blocks): %v, want OVER_LIMIT", k, got)
		}
	}
}

// NEAR_LIMIT_RATIO outside [0, 1] or not a number stops serve (exit 2),
// as a bad variable does, rather than being taken for the default.
func TestServeRefusesBadNearLimitRatio(t *testing.T) {
	for _, v := range []string{"1.5", "lots"} {
		t.Setenv("NEAR_LIMIT_RATIO", v)
		var out, errb bytes.Buffer
		if code := runServe(t.Context(), []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "NEAR_LIMIT_RATIO") {
			t.Errorf("NEAR_LIMIT_RATIO=%s: exit %d, stderr %q; want 2 naming it", v, code, errb.String())
		}
	}
}

// NEAR_LIMIT_RATIO=0 means 0, as in envoyproxy/ratelimit (every admitted
// hit is near the limit), not service.Config's default of 0.8.
func TestNearLimitRatioZeroIsZero(t *testing.T) {
	t.Setenv("NEAR_LIMIT_RATIO", "0")
	var e envflag.Errs
	if got := readRuleOptions(&e).nearRatio; len(e) != 0 || got <= 0 || got*1e15 >= 1 {
		t.Errorf("NEAR_LIMIT_RATIO=0: ratio %v (errors %v), want a positive ratio that floors every capacity to 0", got, e)
	}
}
