package service_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config/configtest"
	"github.com/sluicehq/sluice/rlheader"
	"github.com/sluicehq/sluice/service"
)

// egRule is a rule named as Envoy Gateway's translator names them: the
// name spells a Kubernetes namespace and policy name.
const egRule = `
domain: default/eg/http
descriptors:
  - key: default/eg/http/rule-0
    value: rule-0
    descriptors:
      - key: x-user-id
        rate_limit: {name: team-a/checkout-policy, unit: minute, requests_per_unit: 5}
`

func hashName(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "r" + hex.EncodeToString(sum[:6])
}

// Config.PolicyNames chooses what RateLimit-Policy and RateLimit call a
// rule's limits: the rule's name (the default, as before), a hash of it,
// or the position in the list; with hash and index no header names the
// namespace or policy. RateLimit always names one of RateLimit-Policy's
// items. Before, the headers always spelled the rule's name.
func TestPolicyNamesChooseWhatHeadersCallALimit(t *testing.T) {
	rules := configtest.Parse(t, egRule)
	req := request("default/eg/http", 0, desc("default/eg/http/rule-0", "rule-0", "x-user-id", "bob"))
	for _, c := range []struct {
		names              service.PolicyNames
		policy, ratePrefix string
	}{
		{service.PolicyNamesRule, `"team-a/checkout-policy";q=5;w=60`, `"team-a/checkout-policy";r=4;`},
		{service.PolicyNamesHash, `"` + hashName("team-a/checkout-policy") + `";q=5;w=60`, `"` + hashName("team-a/checkout-policy") + `";r=4;`},
		{service.PolicyNamesIndex, `"0";q=5;w=60`, `"0";r=4;`},
	} {
		t.Run(c.names.String(), func(t *testing.T) {
			h := start(t, t0, service.Config{Rules: rules, Headers: service.HeadersDraft11, PolicyNames: c.names})
			hd := headerMap(decideOne(t, h, req))
			if got := hd["RateLimit-Policy"]; got != c.policy {
				t.Errorf("RateLimit-Policy %q, want %q", got, c.policy)
			}
			if got := hd["RateLimit"]; !strings.HasPrefix(got, c.ratePrefix) {
				t.Errorf("RateLimit %q, want it to start %q", got, c.ratePrefix)
			}
			if c.names != service.PolicyNamesRule {
				for k, v := range hd {
					if strings.Contains(v, "team-a") || strings.Contains(v, "default/eg") {
						t.Errorf("%s %q names the rule", k, v)
					}
				}
			}
		})
	}
}

// Unnamed limits of a list hash and index apart, and RateLimit names the
// one that is tightest (the daily one, after a hit).
func TestPolicyNamesOfUnnamedLimitsStayDistinct(t *testing.T) {
	rules := configtest.Parse(t, perSecondAndDay)
	for _, c := range []struct {
		names              service.PolicyNames
		policy, ratePrefix string
	}{
		{service.PolicyNamesHash, `"` + hashName("d.user") + `";q=5;w=1, "` + hashName("d.user#86400s") + `";q=2;w=86400`, `"` + hashName("d.user#86400s") + `";r=1;`},
		{service.PolicyNamesIndex, `"0";q=5;w=1, "1";q=2;w=86400`, `"1";r=1;`},
	} {
		h := start(t, t0, service.Config{Rules: rules, Headers: service.HeadersDraft11, PolicyNames: c.names})
		hd := headerMap(decideOne(t, h, request("d", 0, desc("user", "bob"))))
		if got := hd["RateLimit-Policy"]; got != c.policy {
			t.Errorf("%v: RateLimit-Policy %q, want %q", c.names, got, c.policy)
		}
		if got := hd["RateLimit"]; !strings.HasPrefix(got, c.ratePrefix) {
			t.Errorf("%v: RateLimit %q, want it to start %q", c.names, got, c.ratePrefix)
		}
	}
}

// Forward auth's answers follow Config.PolicyNames too: RateLimit-Policy,
// RateLimit, X-RateLimit-Reason and the problem's violated policies.
func TestPolicyNamesInForwardAuth(t *testing.T) {
	fwd := traefik("203.0.113.7", "GET", "/items")
	for _, c := range []struct {
		names service.PolicyNames
		want  string
	}{
		{service.PolicyNamesRule, "per-ip"},
		{service.PolicyNamesHash, hashName("per-ip")},
		{service.PolicyNamesIndex, "0"},
	} {
		h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth(), PolicyNames: c.names})
		auth(h, "GET", "10.0.0.2:5555", fwd)
		auth(h, "GET", "10.0.0.2:5555", fwd)
		rec := auth(h, "GET", "10.0.0.2:5555", fwd)
		if rec.Code != http.StatusTooManyRequests {
			t.Fatalf("%v: 3rd: %d, want 429", c.names, rec.Code)
		}
		hd := rec.Header()
		if got := hd.Get("RateLimit"); !strings.HasPrefix(got, `"`+c.want+`";r=0;`) {
			t.Errorf("%v: RateLimit %q", c.names, got)
		}
		if got := hd.Get("RateLimit-Policy"); !strings.HasPrefix(got, `"`+c.want+`";q=2;w=60`) {
			t.Errorf("%v: RateLimit-Policy %q", c.names, got)
		}
		if got := hd.Get(rlheader.HeaderReason); got != c.want {
			t.Errorf("%v: %s %q, want %q", c.names, rlheader.HeaderReason, got, c.want)
		}
		var p rlheader.Problem
		if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != c.want {
			t.Errorf("%v: problem %s: %+v %v", c.names, rec.Body, p.ViolatedPolicies, err)
		}
	}
}

func TestParsePolicyNames(t *testing.T) {
	for _, s := range []string{"rule", "", "HASH", "index"} {
		n, err := service.ParsePolicyNames(s)
		if err != nil || (s != "" && !strings.EqualFold(n.String(), s)) {
			t.Errorf("ParsePolicyNames(%q) = %v, %v", s, n, err)
		}
	}
	if _, err := service.ParsePolicyNames("name"); err == nil {
		t.Error(`ParsePolicyNames("name"): no error`)
	}
}
