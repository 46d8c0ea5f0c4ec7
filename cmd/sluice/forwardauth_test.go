package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// authResp is an answer of /auth.
type authResp struct {
	code int
	hdr  http.Header
	body []byte
}

// authCall sends a forward-auth request to /auth, as a proxy does, with
// the given headers.
func authCall(t *testing.T, url string, hdr map[string]string) authResp {
	t.Helper()
	resp, b := call(t, http.MethodGet, url+"/auth", "", hdr)
	return authResp{resp.StatusCode, resp.Header, b}
}

// fromProxy is what Traefik sends for a GET of uri by client.
func fromProxy(client, uri string) map[string]string {
	return map[string]string{"X-Forwarded-For": client, "X-Forwarded-Method": "GET", "X-Forwarded-Uri": uri, "X-Forwarded-Host": "api.example"}
}

// The rules of the forward-auth tests: token buckets, so that no window
// boundary can refill them during a test.
const authRules = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 2, algorithm: token_bucket, name: per-ip}
  - key: tenant
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket, name: per-tenant}
`

// The forward-auth endpoint of sluice serve, configured by the config
// file's forward_auth section: the header contract through a trusted
// proxy, a reload that changes the mapping, and a reload whose mapping
// fails, which keeps the running one.
func TestServeForwardAuth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeAtomic(t, path, authRules+`forward_auth:
  trusted_proxies: [127.0.0.1]
  descriptors:
    - entries: [{key: remote_address, from: client_ip}]
`)
	s := launch(t, "-config", path)

	// Through the trusted proxy (the test, at 127.0.0.1), the client is
	// X-Forwarded-For's: 2 per hour for 203.0.113.7.
	for i := range 2 {
		r := authCall(t, s.url, fromProxy("203.0.113.7", "/items?page=2"))
		if r.code != 200 {
			t.Fatalf("hit %d: %d %s, want 200", i+1, r.code, r.body)
		}
		if got, want := r.hdr.Get("RateLimit"), `"per-ip";r=`+strconv.Itoa(1-i)+";"; !strings.HasPrefix(got, want) {
			t.Errorf("hit %d: RateLimit %q, want it to start %q", i+1, got, want)
		}
		if got := r.hdr.Get("RateLimit-Policy"); got != `"per-ip";q=2;w=3600` {
			t.Errorf("hit %d: RateLimit-Policy %q", i+1, got)
		}
		if got := r.hdr.Get("Retry-After"); got != "" {
			t.Errorf("hit %d: Retry-After %q on a 200", i+1, got)
		}
	}
	r := authCall(t, s.url, fromProxy("203.0.113.7", "/items"))
	if r.code != http.StatusTooManyRequests {
		t.Fatalf("3rd: %d %s, want 429", r.code, r.body)
	}
	checkPerIPOverLimit(t, r)
	// Another client behind the same proxy has its own allowance, and the
	// rest of the HTTP face is still there.
	if r := authCall(t, s.url, fromProxy("203.0.113.8", "/")); r.code != 200 {
		t.Errorf("another client: %d, want 200", r.code)
	}
	if got := post(t, s.url, `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"203.0.113.7"}]}]}`); got != 429 {
		t.Errorf("POST /json for the client /auth spent: %d, want 429 (the same counter)", got)
	}

	// A reload that changes the mapping: now the tenant header, no client
	// address.
	writeAtomic(t, path, authRules+`forward_auth:
  descriptors:
    - entries:
        - {key: tenant, from: header, header: X-Tenant}
`)
	eventually(t, "a reload", func() bool { return metric(t, s.url, "sluice_config_reloads_total") >= 1 })
	if r := authCall(t, s.url, fromProxy("203.0.113.7", "/")); r.code != 200 || r.hdr.Get("RateLimit") != "" {
		t.Errorf("after the reload, the over-limit client without a tenant: %d %q, want 200 and no RateLimit (nothing to ask)", r.code, r.hdr.Get("RateLimit"))
	}
	tenant := func(name string) authResp {
		h := fromProxy("203.0.113.7", "/")
		h["X-Tenant"] = name
		return authCall(t, s.url, h)
	}
	if r := tenant("acme"); r.code != 200 || !strings.HasPrefix(r.hdr.Get("RateLimit"), `"per-tenant";r=0;`) {
		t.Errorf("tenant acme: %d %q, want 200 from per-tenant", r.code, r.hdr.Get("RateLimit"))
	}
	if r := tenant("acme"); r.code != 429 || r.hdr.Get("Retry-After") == "" {
		t.Errorf("tenant acme again: %d, Retry-After %q, want 429 with one", r.code, r.hdr.Get("Retry-After"))
	}

	// A mapping that reads the client's address with no proxy trusted
	// (here, and no -trusted-proxies) fails the reload, naming the entry.
	writeAtomic(t, path, authRules+`forward_auth:
  descriptors:
    - entries:
        - {key: remote_address, from: client_ip}
`)
	eventually(t, "a failed reload", func() bool { return metric(t, s.url, "sluice_config_reload_failures_total") >= 1 })
	if log := s.stderr.String(); !strings.Contains(log, "rl.yaml:10:11: config: forward_auth entry") ||
		!strings.Contains(log, "but no proxy is trusted") || !strings.Contains(log, "line=10") {
		t.Errorf("the failed reload's log does not name rl.yaml:10:11:\n%s", log)
	}
	if r := tenant("beta"); r.code != 200 || !strings.HasPrefix(r.hdr.Get("RateLimit"), `"per-tenant";`) {
		t.Errorf("after the failed reload, tenant beta: %d %q, want the running mapping's 200", r.code, r.hdr.Get("RateLimit"))
	}
}

// checkPerIPOverLimit checks /auth's 429 of the per-ip policy (2 an
// hour): a Retry-After in whole seconds within the hour, the RateLimit
// fields, no caching, and a problem body naming per-ip.
func checkPerIPOverLimit(t *testing.T, r authResp) {
	t.Helper()
	retry, err := strconv.Atoi(r.hdr.Get("Retry-After"))
	if err != nil || retry < 1 || retry > 3600 {
		t.Errorf("429: Retry-After %q, want whole seconds in [1, 3600]", r.hdr.Get("Retry-After"))
	}
	want := map[string]string{
		"RateLimit":                  `"per-ip";r=0;t=` + r.hdr.Get("Retry-After"),
		"RateLimit-Policy":           `"per-ip";q=2;w=3600`,
		"Cache-Control":              "no-store",
		"Content-Type":               "application/problem+json",
		"Sluice-Rate-Limited-Reason": "per-ip",
	}
	for k, v := range want {
		if got := r.hdr.Get(k); got != v {
			t.Errorf("429: %s = %q, want %q", k, got, v)
		}
	}
	var problem struct {
		Status   int      `json:"status"`
		Violated []string `json:"violated-policies"`
	}
	if err := json.Unmarshal(r.body, &problem); err != nil || problem.Status != 429 || len(problem.Violated) != 1 || problem.Violated[0] != "per-ip" {
		t.Errorf("429 body %s (%v), want a problem naming per-ip", r.body, err)
	}
}

// Whose X-Forwarded-For is believed: the flag's proxies (added to the
// config's), and nobody else's.
func TestServeForwardAuthTrust(t *testing.T) {
	const mapping = `forward_auth:
  descriptors:
    - entries: [{key: remote_address, from: client_ip}]
`
	spent := func(t *testing.T, url, addr string) bool {
		return post(t, url, `{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"`+addr+`"}]}]}`) == 429
	}

	t.Run("flag", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "rl.yaml")
		writeAtomic(t, path, authRules+mapping)
		s := launch(t, "-config", path, "-trusted-proxies", "192.0.2.1, 127.0.0.0/8")
		var codes []int
		for _, client := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.1", "203.0.113.1"} {
			codes = append(codes, authCall(t, s.url, fromProxy(client, "/")).code)
		}
		if want := []int{200, 200, 200, 429}; !slices.Equal(codes, want) {
			t.Errorf("clients 1, 2, 1, 1 through a trusted proxy: %v, want %v", codes, want)
		}
		if spent(t, s.url, "127.0.0.1") {
			t.Error("the proxy's own address was spent")
		}
	})

	t.Run("untrusted peer", func(t *testing.T) {
		// The config trusts a proxy that is not the test's address: the
		// client is the peer, whatever X-Forwarded-For says.
		path := filepath.Join(t.TempDir(), "rl.yaml")
		writeAtomic(t, path, strings.Replace(authRules+mapping, "forward_auth:\n", "forward_auth:\n  trusted_proxies: [10.0.0.0/8]\n", 1))
		s := launch(t, "-config", path)
		var codes []int
		for _, client := range []string{"203.0.113.1", "203.0.113.2", "203.0.113.3"} {
			codes = append(codes, authCall(t, s.url, fromProxy(client, "/")).code)
		}
		if want := []int{200, 200, 429}; !slices.Equal(codes, want) {
			t.Errorf("spoofed clients 1, 2, 3 from an untrusted peer: %v, want %v (one allowance, the peer's)", codes, want)
		}
		if !spent(t, s.url, "127.0.0.1") || spent(t, s.url, "203.0.113.1") {
			t.Error("the spoofed address was spent, not the peer's")
		}
	})
}

// The built-in example maps X-User to its user rule: 3 per minute.
func TestServeBuiltInForwardAuth(t *testing.T) {
	url := launch(t).url
	var codes []int
	for range 4 {
		codes = append(codes, authCall(t, url, map[string]string{"X-User": "bob"}).code)
	}
	if want := []int{200, 200, 200, 429}; !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
}

// clientIPAuthFile writes authRules with a forward_auth block whose one
// entry is from client_ip, which needs a trusted proxy, to rl.yaml in a
// temporary directory, and returns its path.
func clientIPAuthFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rl.yaml")
	writeAtomic(t, path, authRules+"forward_auth:\n  descriptors:\n    - entries: [{key: remote_address, from: client_ip}]\n")
	return path
}

func TestServeForwardAuthStartErrors(t *testing.T) {
	path := clientIPAuthFile(t)
	serve := []string{"serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-config", path}
	for _, tt := range []runCase{
		{serve, 1, "", "rl.yaml:9:17: config: forward_auth entry \"remote_address\" is from: client_ip, but no proxy is trusted"},
		{append(slices.Clip(serve), "-trusted-proxies", "10.0.0.0/8,nonsense"), 2, "", `-trusted-proxies: clientip: bad trusted proxy "nonsense"`},
	} {
		tt.check(t)
	}
}

// sluice check refuses what serve's start-up refuses of a forward_auth
// block, with the same message and exit status: an entry from client_ip
// with no proxy trusted, and a -trusted-proxies it cannot parse; given the
// -trusted-proxies serve would run with, the config passes.
func TestCheckRefusesForwardAuthServeRefuses(t *testing.T) {
	path := clientIPAuthFile(t)
	for _, tt := range []runCase{
		{[]string{"check", "-store", "memory", path}, 1, "", "rl.yaml:9:17: config: forward_auth entry \"remote_address\" is from: client_ip, but no proxy is trusted"},
		{[]string{"check", "-store", "memory", "-trusted-proxies", "10.0.0.0/8,nonsense", path}, 2, "", `-trusted-proxies: clientip: bad trusted proxy "nonsense"`},
		{[]string{"check", "-store", "memory", "-trusted-proxies", "10.0.0.0/8", path}, 0, "", ""},
	} {
		tt.check(t)
	}
}
