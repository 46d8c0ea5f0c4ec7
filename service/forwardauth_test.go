package service_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/clientip"
	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/failsafe"
	canon "github.com/sluicehq/sluice/request"
	"github.com/sluicehq/sluice/rlheader"
	"github.com/sluicehq/sluice/service"
)

// edgeRules: 2 per minute per client IP ("per-ip"), 1 per minute for a
// POST to a path, 100 per minute per tenant.
func edgeRules() *fakeRules {
	perIP := fixed("edge.remote_address", 2, config.Minute)
	perIP.Name = "per-ip"
	return (&fakeRules{domain: "edge"}).
		add(perIP, "remote_address", "").
		add(fixed("edge.method_POST.path", 1, config.Minute), "method", "POST", "path", "").
		add(fixed("edge.tenant", 100, config.Minute), "tenant", "")
}

var proxies = &clientip.Resolver{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.0/8")}}

func edgeAuth() *config.ForwardAuth {
	fa := authSection("edge",
		[]config.AuthEntry{{Key: "remote_address", From: config.FromClientIP}},
		[]config.AuthEntry{{Key: "method", From: config.FromMethod}, {Key: "path", From: config.FromPath}},
		[]config.AuthEntry{{Key: "tenant", From: config.FromHeader, Header: "X-Tenant"}},
	)
	fa.TrustedProxies = proxies.TrustedProxies
	return fa
}

// authSection is a forward_auth section of domain with the descriptors
// descs, as config builds it from a file.
func authSection(domain string, descs ...[]config.AuthEntry) *config.ForwardAuth {
	fa := &config.ForwardAuth{Domain: domain}
	for _, d := range descs {
		fa.Descriptors = append(fa.Descriptors, config.AuthDescriptor{Entries: d})
	}
	return fa
}

// auth sends a forwarded request to /auth from peer with the given headers.
func auth(h *harness, method, peer string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, service.ForwardAuthPath, nil)
	req.RemoteAddr = peer
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.svc.Handler().ServeHTTP(rec, req)
	return rec
}

func traefik(client, method, uri string) map[string]string {
	return map[string]string{"X-Forwarded-For": client, "X-Forwarded-Method": method, "X-Forwarded-Uri": uri, "X-Forwarded-Proto": "https", "X-Forwarded-Host": "api.example"}
}

func TestForwardAuthContract(t *testing.T) {
	// A minute window starts at 1699999980: 40 s left at t0.
	h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth()})
	fwd := traefik("203.0.113.7", "GET", "/items?page=2")
	for i, wantRate := range []string{`"per-ip";r=1;t=40`, `"per-ip";r=0;t=40`} {
		rec := auth(h, "GET", "10.0.0.2:5555", fwd)
		if rec.Code != http.StatusOK {
			t.Fatalf("hit %d: %d %s, want 200", i+1, rec.Code, rec.Body)
		}
		if got := rec.Header().Get("RateLimit"); got != wantRate {
			t.Errorf("hit %d: RateLimit %q, want %q", i+1, got, wantRate)
		}
		if got := rec.Header().Get("RateLimit-Policy"); got != `"per-ip";q=2;w=60` {
			t.Errorf("hit %d: RateLimit-Policy %q", i+1, got)
		}
		if rec.Header().Get("Retry-After") != "" || rec.Body.Len() != 0 {
			t.Errorf("hit %d: Retry-After %q, body %q on a 200", i+1, rec.Header().Get("Retry-After"), rec.Body)
		}
	}
	rec := auth(h, "GET", "10.0.0.2:5555", fwd)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("3rd: %d, want 429", rec.Code)
	}
	want := map[string]string{
		"Retry-After":         "40",
		"Cache-Control":       "no-store",
		"Content-Type":        rlheader.ProblemContentType,
		"RateLimit":           `"per-ip";r=0;t=40`,
		"RateLimit-Policy":    `"per-ip";q=2;w=60`,
		rlheader.HeaderReason: "per-ip",
	}
	for k, v := range want {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("429: %s = %q, want %q", k, got, v)
		}
	}
	var p rlheader.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("429 body %s: %v", rec.Body, err)
	}
	if p.Type != rlheader.TypeQuotaExceeded || p.Status != 429 || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "per-ip" {
		t.Errorf("429 body: %+v", p)
	}
	// Another client behind the same proxy has its own allowance.
	if rec := auth(h, "GET", "10.0.0.2:5555", traefik("203.0.113.8", "GET", "/")); rec.Code != http.StatusOK {
		t.Errorf("another client: %d, want 200", rec.Code)
	}
	// A peer outside the trusted proxies cannot choose its address.
	for i, want := range []int{200, 200, 429} {
		if rec := auth(h, "GET", "198.51.100.9:1", traefik("203.0.113.99", "GET", "/")); rec.Code != want {
			t.Errorf("untrusted peer, hit %d: %d, want %d", i+1, rec.Code, want)
		}
	}
	keys := strings.Join(h.store.calls(), "\n")
	for _, k := range []string{"edge_remote_address_203.0.113.7", "edge_remote_address_198.51.100.9"} {
		if !strings.Contains(keys, k) {
			t.Errorf("no store call for %s in:\n%s", k, keys)
		}
	}
	if strings.Contains(keys, "203.0.113.99") {
		t.Errorf("a spoofed X-Forwarded-For reached the store:\n%s", keys)
	}
}

func TestForwardAuthNginxStyle(t *testing.T) {
	// NGINX's auth_request keeps the method; the URI comes in X-Original-URI.
	h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth()})
	hdr := map[string]string{"X-Forwarded-For": "203.0.113.7", "X-Original-URI": "/login?next=/home"}
	if rec := auth(h, "POST", "10.0.0.2:1", hdr); rec.Code != http.StatusOK {
		t.Fatalf("first POST: %d", rec.Code)
	}
	rec := auth(h, "POST", "10.0.0.2:1", hdr)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("second POST /login: %d, want 429", rec.Code)
	}
	if got := rec.Header().Get(rlheader.HeaderReason); got != "edge.method_POST.path" {
		t.Errorf("reason %q, want the path rule", got)
	}
	// Both enforced policies are listed; RateLimit describes the one refusing.
	if got := rec.Header().Get("RateLimit-Policy"); got != `"per-ip";q=2;w=60, "edge.method_POST.path";q=1;w=60` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := rec.Header().Get("RateLimit"); !strings.HasPrefix(got, `"edge.method_POST.path";r=0;`) {
		t.Errorf("RateLimit %q", got)
	}
	want := "edge_method_POST_path_/login"
	found := false
	for _, k := range h.store.calls() {
		found = found || k == want
	}
	if !found {
		t.Errorf("store keys %q, want one %q (the query dropped)", h.store.calls(), want)
	}
}

func TestForwardAuthMissingValues(t *testing.T) {
	fa := authSection("edge", []config.AuthEntry{{Key: "tenant", From: config.FromHeader, Header: "X-Tenant"}})
	h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: fa})
	// No header: the descriptor is left out, and with none left, 200 without asking.
	rec := auth(h, "GET", "10.0.0.2:1", nil)
	if rec.Code != http.StatusOK || rec.Header().Get("RateLimit") != "" {
		t.Errorf("no tenant: %d %v, want 200 without headers", rec.Code, rec.Header())
	}
	if got := h.store.calls(); len(got) != 0 {
		t.Errorf("store called without descriptors: %q", got)
	}
	rec = auth(h, "HEAD", "10.0.0.2:1", map[string]string{"X-Tenant": "acme"})
	if rec.Code != http.StatusOK || rec.Header().Get("RateLimit") != `"edge.tenant";r=99;t=40` {
		t.Errorf("tenant acme: %d %v", rec.Code, rec.Header())
	}
	if got := h.store.calls(); len(got) != 1 || got[0] != "edge_tenant_acme" {
		t.Errorf("store keys %q, want [edge_tenant_acme]", got)
	}
}

func TestForwardAuthLiteralAndURI(t *testing.T) {
	rules := (&fakeRules{domain: "edge"}).add(fixed("edge.generic_key_api.uri", 1, config.Minute), "generic_key", "api", "uri", "")
	fa := authSection("edge", []config.AuthEntry{{Key: "generic_key", From: config.FromLiteral, Value: "api"}, {Key: "uri", From: config.FromURI}})
	h := start(t, t0, service.Config{Rules: rules, ForwardAuth: fa})
	for i, want := range []int{200, 429} {
		if rec := auth(h, "GET", "10.0.0.2:1", map[string]string{"X-Forwarded-Uri": "/a?b=1"}); rec.Code != want {
			t.Errorf("hit %d: %d, want %d", i+1, rec.Code, want)
		}
	}
	if got := h.store.calls(); len(got) == 0 || got[0] != "edge_generic_key_api_uri_/a?b=1" {
		t.Errorf("store keys %q", got)
	}
}

func TestForwardAuthOverHTTP(t *testing.T) {
	h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth()})
	var codes []int
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest("GET", h.http.URL+service.ForwardAuthPath, nil)
		req.Header.Set("X-Forwarded-For", "192.0.2.1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 429 {
		t.Errorf("statuses %v, want [200 200 429]", codes)
	}
}

func TestForwardAuthStoreFailure(t *testing.T) {
	fwd := traefik("203.0.113.7", "GET", "/")
	h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth(), Limiter: failing{}})
	rec := auth(h, "GET", "10.0.0.2:1", fwd)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("raw failing store: %d %v, want 503 with Retry-After", rec.Code, rec.Header())
	}
	for _, c := range []struct {
		mode failsafe.Mode
		want int
	}{{failsafe.Open, 200}, {failsafe.Closed, 429}} {
		h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth(), Limiter: failing{},
			Failure: &service.FailurePolicy{Mode: c.mode}})
		if rec := auth(h, "GET", "10.0.0.2:1", fwd); rec.Code != c.want {
			t.Errorf("failure mode %v: %d, want %d", c.mode, rec.Code, c.want)
		}
	}
}

func TestForwardAuthNotConfigured(t *testing.T) {
	h := start(t, t0, service.Config{Rules: edgeRules()})
	if rec := auth(h, "GET", "10.0.0.2:1", nil); rec.Code != http.StatusNotFound {
		t.Errorf("/auth without ForwardAuth: %d, want 404", rec.Code)
	}
}

func TestForwardAuthConfigErrors(t *testing.T) {
	type c struct {
		fa  *config.ForwardAuth
		res *clientip.Resolver
	}
	cases := map[string]c{
		"empty domain":               {fa: authSection("", []config.AuthEntry{{Key: "k", From: config.FromMethod}})},
		"no descriptors":             {fa: authSection("d")},
		"empty descriptor":           {fa: authSection("d", nil)},
		"empty key":                  {fa: authSection("d", []config.AuthEntry{{From: config.FromMethod}})},
		"header without name":        {fa: authSection("d", []config.AuthEntry{{Key: "k", From: config.FromHeader}})},
		"empty literal":              {fa: authSection("d", []config.AuthEntry{{Key: "k", From: config.FromLiteral}})},
		"unknown source":             {fa: authSection("d", []config.AuthEntry{{Key: "k", From: 99}})},
		"client IP, no resolver":     {fa: authSection("d", []config.AuthEntry{{Key: "ip", From: config.FromClientIP}})},
		"client IP, trusting nobody": {fa: edgeAuth(), res: &clientip.Resolver{}},
		"client IP, bad resolver":    {fa: edgeAuth(), res: &clientip.Resolver{TrustedProxies: proxies.TrustedProxies, IPv6Prefix: 129}},
	}
	for name, c := range cases {
		if _, err := service.New(service.Config{Limiter: failing{}, ForwardAuth: c.fa, AuthResolver: c.res}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// ForwardAuthHandler serves the same contract as Handler's /auth, wherever
// it is mounted, for a Service built without Config.ForwardAuth; two
// handlers of one Service share its store, and an invalid mapping is
// refused as New refuses it.
func TestForwardAuthHandler(t *testing.T) {
	h := start(t, t0, service.Config{Rules: edgeRules()})
	byIP, err := h.svc.ForwardAuthHandler(edgeAuth(), proxies)
	if err != nil {
		t.Fatal(err)
	}
	byTenant, err := h.svc.ForwardAuthHandler(authSection("edge",
		[]config.AuthEntry{{Key: "remote_address", From: config.FromHeader, Header: "X-Client"}}), nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(hd http.Handler, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", "/elsewhere", nil)
		req.RemoteAddr = "10.0.0.2:1"
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		hd.ServeHTTP(rec, req)
		return rec
	}
	if rec := send(byIP, traefik("203.0.113.7", "GET", "/")); rec.Code != 200 || rec.Header().Get("RateLimit") != `"per-ip";r=1;t=40` {
		t.Fatalf("first: %d %v", rec.Code, rec.Header())
	}
	// The other mapping names the same key and value: the same counter.
	rec := send(byTenant, map[string]string{"X-Client": "203.0.113.7"})
	if rec.Code != 200 || rec.Header().Get("RateLimit") != `"per-ip";r=0;t=40` {
		t.Fatalf("second, through the other mapping: %d %v", rec.Code, rec.Header())
	}
	rec = send(byIP, traefik("203.0.113.7", "GET", "/"))
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "40" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("third: %d %v, want 429 with Retry-After 40", rec.Code, rec.Header())
	}
	// Handler itself still has no /auth: the mapping is the caller's.
	if rec := auth(h, "GET", "10.0.0.2:1", nil); rec.Code != http.StatusNotFound {
		t.Errorf("Handler's /auth: %d, want 404", rec.Code)
	}
	for name, fa := range map[string]*config.ForwardAuth{
		"nil":                    nil,
		"client IP, no resolver": authSection("d", []config.AuthEntry{{Key: "ip", From: config.FromClientIP}}),
	} {
		if _, err := h.svc.ForwardAuthHandler(fa, nil); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The method, path and URI of a forwarded request are in canonical form
// (package request), so every spelling of POST /login spends the one
// allowance of 1 per minute; the absolute form of X-Original-URI reads its
// path; a forwarded request with no canonical form is answered 400 with a
// problem.
func TestForwardAuthCanonicalForm(t *testing.T) {
	h := start(t, t0, service.Config{Rules: edgeRules(), ForwardAuth: edgeAuth()})
	clients := 0
	hit := func(method, uri string) int {
		clients++ // a fresh client each time, so that per-ip never decides
		fwd := traefik("203.0.113."+strconv.Itoa(clients), method, uri)
		return auth(h, "GET", "10.0.0.2:5555", fwd).Code
	}
	if code := hit("POST", "/login?next=/"); code != http.StatusOK {
		t.Fatalf("first POST /login: %d", code)
	}
	for _, sp := range [][2]string{
		{"post", "/login"}, {"pOsT", "/login"}, {"POST", "/%6Cogin"}, {"POST", "//login"},
		{"POST", "/./login"}, {"POST", "/login/"}, {"POST", "/foo/../login"}, {"POST", "/foo/%2E%2e/login?x"},
		{"POST", "http://api.example/login"},
	} {
		if code := hit(sp[0], sp[1]); code != http.StatusTooManyRequests {
			t.Errorf("%s %s after the limit: %d, want 429", sp[0], sp[1], code)
		}
	}
	for _, hdr := range []map[string]string{
		{"X-Forwarded-Method": "PO ST", "X-Forwarded-Uri": "/login"},
		{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/%zz"},
		{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "login"},
		{"X-Forwarded-Method": "POST", "X-Forwarded-Uri": "/login", "X-Forwarded-Host": "api.example.com.."},
	} {
		rec := auth(h, "GET", "10.0.0.2:5555", hdr)
		var p rlheader.Problem
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != rlheader.ProblemContentType ||
			json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Status != 400 {
			t.Errorf("%v: %d %q %s, want a 400 problem", hdr, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
		}
	}
}

// A host source reads X-Forwarded-Host in canonical form: every spelling
// of api.example.com spends its one allowance.
func TestForwardAuthHostSource(t *testing.T) {
	rules := (&fakeRules{domain: "edge"}).add(fixed("edge.host", 1, config.Minute), "host", "")
	fa := authSection("edge", []config.AuthEntry{{Key: "host", From: config.FromHost}})
	h := start(t, t0, service.Config{Rules: rules, ForwardAuth: fa})
	for i, host := range []string{"api.example.com", "API.Example.com", "api.example.com.", "api.example.com:8443"} {
		want := http.StatusTooManyRequests
		if i == 0 {
			want = http.StatusOK
		}
		if code := auth(h, "GET", "10.0.0.2:5555", map[string]string{"X-Forwarded-Host": host}).Code; code != want {
			t.Errorf("X-Forwarded-Host %s: %d, want %d", host, code, want)
		}
	}
	if code := auth(h, "GET", "10.0.0.2:5555", map[string]string{"X-Forwarded-Host": "api.example.com.."}).Code; code != http.StatusBadRequest {
		t.Errorf("api.example.com..: %d, want 400", code)
	}
	if code := auth(h, "GET", "10.0.0.2:5555", nil).Code; code != http.StatusOK {
		t.Errorf("no X-Forwarded-Host: %d, want 200 (the descriptor is left out)", code)
	}
}

// Each spelling of /login spends /login's allowance on /auth exactly when
// the application behind the proxy serves it as /login, as forward_auth's
// path_semantics says it reads paths (the same fold as sluice proxy's
// routes). Before path_semantics, each was a fresh allowance.
func TestForwardAuthPathFormsSpendTheLimitOfThePathTheUpstreamServes(t *testing.T) {
	forms := []struct {
		uri   string
		folds string
	}{
		{"/LOGIN", "case_insensitive iis"},
		{"/Login?next=/", "case_insensitive iis"},
		{"/login;x", "servlet"},
		{"/login%3Bx", "servlet"},
		{"/login%20", "iis servlet"},
		{"/login%09", "servlet"},
		{"/LOGIN;jsessionid=1", ""},
	}
	rules := (&fakeRules{domain: "edge"}).add(fixed("edge.method_POST.path", 1, config.Minute), "method", "POST", "path", "")
	for _, sem := range []canon.PathSemantics{canon.PathStrict, canon.PathCaseInsensitive, canon.PathIIS, canon.PathServlet} {
		for _, f := range forms {
			fa := authSection("edge", []config.AuthEntry{{Key: "method", From: config.FromMethod}, {Key: "path", From: config.FromPath}})
			fa.PathSemantics = sem
			h := start(t, t0, service.Config{Rules: rules, ForwardAuth: fa})
			if rec := auth(h, "GET", "10.0.0.2:5555", traefik("203.0.113.7", "POST", "/login")); rec.Code != http.StatusOK {
				t.Fatalf("%v: /login: %d", sem, rec.Code)
			}
			want := http.StatusOK
			if strings.Contains(" "+f.folds+" ", " "+sem.String()+" ") {
				want = http.StatusTooManyRequests
			}
			if rec := auth(h, "GET", "10.0.0.2:5555", traefik("203.0.113.7", "POST", f.uri)); rec.Code != want {
				t.Errorf("path_semantics %v: %s after /login's one request: %d, want %d", sem, f.uri, rec.Code, want)
			}
		}
	}
}
