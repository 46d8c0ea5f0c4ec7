package admin_test

// The admin face against hostile clients: calls a browser sends from
// another site, bodies not sent as JSON, audit lines a client could grow
// or multiply, and names and time zones the config would refuse.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/memstore"
)

// mtlsCall is a call that the listener's verified client certificate
// authenticates, as a browser holding the operator's certificate sends
// it; header is set on it.
func mtlsCall(method, path, body string, header map[string]string) *http.Request {
	r := httptest.NewRequest(method, "https://admin.example:9901"+path, strings.NewReader(body))
	r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: "ops"}}}}}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	return r
}

// A reset is refused when a browser sends it from another site (Origin
// or Sec-Fetch-Site says so) or as text/plain (which a cross-site form
// can send without a preflight): under mTLS, the browser's certificate
// alone would otherwise authenticate it. The key keeps what it spent; a
// call of the same origin, or of a program (no Origin), resets it.
func TestCrossSiteResetIsRefusedUnderMTLS(t *testing.T) {
	clock := clocktest.At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: clock, SweepInterval: -1})
	defer mem.Close()
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 3, Period: time.Minute, Burst: 3}
	if _, err := mem.AllowN(context.Background(), "k", lim, 3); err != nil {
		t.Fatal(err)
	}
	api := admin.New(admin.Config{ClientCerts: true, Limiter: mem, Clock: clock, Logger: slog.New(slog.DiscardHandler)})
	body := `{"key":"k","limit":` + limitJSON + `}`
	remaining := func() int {
		res, err := mem.Peek(context.Background(), "k", lim)
		if err != nil {
			t.Fatal(err)
		}
		return res.Remaining
	}
	for _, c := range []struct {
		name   string
		header map[string]string
		want   int
	}{
		{"text/plain from another origin", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, http.StatusForbidden},
		{"JSON from another origin", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, http.StatusForbidden},
		{"JSON, Sec-Fetch-Site cross-site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"JSON, Sec-Fetch-Site same-site", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"text/plain without an Origin", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"a form without an Origin", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"no Content-Type", nil, http.StatusUnsupportedMediaType},
	} {
		w := httptest.NewRecorder()
		api.ServeHTTP(w, mtlsCall("POST", "/v1/keys/reset", body, c.header))
		if w.Code != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, w.Code, w.Body, c.want)
		}
		if r := remaining(); r != 0 {
			t.Fatalf("%s: the key has %d remaining after a refused reset, want 0", c.name, r)
		}
	}
	for _, h := range []map[string]string{
		{"Content-Type": "application/json"},
		{"Content-Type": "application/json; charset=utf-8", "Origin": "https://admin.example:9901"},
		{"Content-Type": "application/json", "Sec-Fetch-Site": "same-origin"},
	} {
		if _, err := mem.AllowN(context.Background(), "k", lim, 3); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, mtlsCall("POST", "/v1/keys/reset", body, h))
		if w.Code != http.StatusOK || remaining() != 3 {
			t.Errorf("%v: %d %s, %d remaining, want 200 and 3", h, w.Code, w.Body, remaining())
		}
	}
}

// Every operation that changes something is refused from another site,
// before it acts, the one without a body (DELETE) included; reads (GET)
// are not changes and are served.
func TestCrossSiteChangesAreRefused(t *testing.T) {
	f := newFixture(t, admin.Config{})
	for _, c := range calls {
		req, _ := http.NewRequest(c.method, f.srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusForbidden
		if c.method == "GET" {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("%s %s from another origin: %d, want %d", c.method, c.path, resp.StatusCode, want)
		}
	}
	if len(f.plans.plans)+len(f.plans.tenants)+len(f.plans.overrides) != 0 {
		t.Errorf("cross-site calls changed plans: %+v", f.plans)
	}
}

// maxAuditLine bounds an audit line: its fields each at most
// 256 bytes and a marker, plus the names and the rest.
const maxAuditLine = 8*(admin.MaxLogField+32) + 256

// A call with a 15 KB path (or query, or method) writes an audit line of
// bounded size that says how much was cut, not one of 15 KB.
func TestAuditLineOfAHugeRequestIsBounded(t *testing.T) {
	var buf bytes.Buffer
	api := admin.New(admin.Config{Token: []byte(token), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	huge := strings.Repeat("é", 7500) // 15,000 bytes, cut on a rune boundary
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", "/"+url.PathEscape(huge), nil),
		httptest.NewRequest("GET", "/v1/usage?key="+url.QueryEscape(huge), nil),
		httptest.NewRequest(strings.Repeat("M", 15000), "/v1/usage", nil),
	} {
		buf.Reset()
		r.Header.Set("Authorization", "Bearer "+token)
		api.ServeHTTP(httptest.NewRecorder(), r)
		line := buf.String()
		if len(line) > maxAuditLine || !strings.Contains(line, "bytes)") {
			t.Errorf("an audit line of %d bytes (want at most %d, with the cut marked): %.300s", len(line), maxAuditLine, line)
		}
		if !strings.Contains(line, `"msg":"admin call"`) {
			t.Errorf("no audit line: %.300s", line)
		}
	}
}

// 1,000 calls without credentials from one peer write a few audit lines,
// then, once the window has passed, one line that counts those not
// written; another peer is audited meanwhile, and a caller with the token
// always is.
func TestUnauthenticatedFloodIsAuditedAtABoundedRate(t *testing.T) {
	var buf bytes.Buffer
	clock := clocktest.At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	api := admin.New(admin.Config{Token: []byte(token), Clock: clock, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	call := func(remote, auth string) {
		r := httptest.NewRequest("GET", "/v1/usage?key=k", nil)
		r.RemoteAddr = remote
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		api.ServeHTTP(httptest.NewRecorder(), r)
	}
	for i := range 1000 {
		call("192.0.2.1:"+string(rune('0'+i%10))+"000", "")
	}
	call("192.0.2.2:1000", "Bearer wrong")
	call("192.0.2.1:1000", "Bearer "+token)
	lines := strings.Count(buf.String(), "\n")
	if lines > 10 || strings.Count(buf.String(), `"who":"anonymous"`) > 5 {
		t.Fatalf("%d audit lines (%d bytes) for 1,000 refused calls of one peer, want at most 10:\n%.1000s", lines, buf.Len(), buf.String())
	}
	if !strings.Contains(buf.String(), `"remote":"192.0.2.2:1000"`) || !strings.Contains(buf.String(), `"who":"token"`) {
		t.Errorf("another peer's refusal or the token's call was not audited:\n%s", buf.String())
	}
	buf.Reset()
	clock.Advance(time.Minute)
	call("192.0.2.1:4000", "")
	if !strings.Contains(buf.String(), `"msg":"admin calls not logged"`) || !strings.Contains(buf.String(), `"calls":995`) {
		t.Errorf("after the window, no count of the 995 calls not written:\n%s", buf.String())
	}
}

// Names the config would refuse (a bidirectional override, a space at an
// end, a control character) and the time zone "Local" are refused by the
// API as by the config, 400, before anything is written.
func TestAdminRefusesNamesAndZonesTheConfigRefuses(t *testing.T) {
	f := newFixture(t, admin.Config{})
	rlo := url.PathEscape("pro\u202Egnp.exe")
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/plans/" + rlo, `{"limits":{"api.tenant":` + limitJSON + `}}`},
		{"PUT", "/v1/plans/%20pro", `{"limits":{"api.tenant":` + limitJSON + `}}`},
		{"PUT", "/v1/plans/pro%20", `{"limits":{"api.tenant":` + limitJSON + `}}`},
		{"PUT", "/v1/plans/pro", `{"limits":{"api.tenant\u202E":` + limitJSON + `}}`},
		{"PUT", "/v1/tenants/" + rlo + "/plan", `{"plan":"pro"}`},
		{"PUT", "/v1/tenants/%20acme/plan", `{"plan":"pro"}`},
		{"PUT", "/v1/tenants/acme/plan", `{"plan":" pro"}`},
		{"PUT", "/v1/tenants/acme/plan", `{"plan":"p\u2066ro"}`},
		{"PUT", "/v1/tenants/acme/overrides/" + rlo, `{"limit":` + limitJSON + `}`},
		{"PUT", "/v1/tenants/acme/overrides/api.tenant", `{"limit":{"rate":5,"calendar":{"unit":"month","time_zone":"Local"}}}`},
		{"PUT", "/v1/plans/pro", `{"limits":{"api.tenant":{"rate":5,"calendar":{"unit":"day","time_zone":"Local"}}}}`},
		{"POST", "/v1/keys/peek", `{"key":"k","limit":{"rate":5,"calendar":{"unit":"day","time_zone":"Local"}}}`},
		{"PUT", "/v1/tenants/acme/overrides/api.tenant", `{"limit":{"rate":5,"calendar":{"unit":"month","time_zone":"Europe/../../etc/passwd"}}}`},
	} {
		code, body, _ := f.do(t, c.method, c.path, "Bearer "+token, c.body)
		if code != http.StatusBadRequest {
			t.Errorf("%s %s %s: %d %s, want 400", c.method, c.path, c.body, code, body)
		}
	}
	if len(f.plans.plans)+len(f.plans.tenants)+len(f.plans.overrides) != 0 {
		t.Errorf("refused names were written: %+v", f.plans)
	}
	// What the config accepts, the API accepts.
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v1/plans/pro%20plus", `{"limits":{"api.tenant":{"rate":5,"calendar":{"unit":"month","time_zone":"Europe/Berlin"}}}}`},
		{"PUT", "/v1/tenants/Zürich%20AG/plan", `{"plan":"pro plus"}`},
	} {
		if code, body, _ := f.do(t, c.method, c.path, "Bearer "+token, c.body); code != http.StatusNoContent {
			t.Errorf("%s %s %s: %d %s, want 204", c.method, c.path, c.body, code, body)
		}
	}
}

// The sign-in path is open to anyone, so a flood of it (the form fetched,
// a wrong method, a cross-site post) is audited at the bounded rate of
// other calls without credentials, not a line per call.
func TestLoginPathFloodIsAuditedAtABoundedRate(t *testing.T) {
	var buf bytes.Buffer
	clock := clocktest.At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	api := admin.New(admin.Config{Token: []byte(token), Clock: clock, SessionPaths: "/page", Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	for i := range 900 {
		method := []string{"GET", "DELETE", "POST"}[i%3]
		r := httptest.NewRequest(method, admin.LoginPath, nil)
		if method == "POST" {
			r.Header.Set("Sec-Fetch-Site", "cross-site")
		}
		r.RemoteAddr = "192.0.2.1:1000"
		api.ServeHTTP(httptest.NewRecorder(), r)
	}
	if lines := strings.Count(buf.String(), "\n"); lines > 10 {
		t.Fatalf("%d audit lines (%d bytes) for 900 sign-in calls without credentials from one peer, want at most 10", lines, buf.Len())
	}
}

// A sign-out with no session (no cookie, or one no longer live) signed no
// one out: anyone can send it, so 500 of them from one peer write a few
// audit lines, not 500, as bad sign-ins do.
func TestSignOutWithoutASessionIsAuditedAtABoundedRate(t *testing.T) {
	var buf bytes.Buffer
	clock := clocktest.At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	api := admin.New(admin.Config{Token: []byte(token), Clock: clock, SessionPaths: "/page", Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	for i := range 500 {
		r := httptest.NewRequest("POST", "/page"+admin.LogoutPath, nil)
		r.RemoteAddr = "192.0.2.1:1000"
		if i%2 == 1 {
			r.Header.Set("Cookie", admin.SessionCookie+"=dead")
		}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		if w.Code != http.StatusSeeOther {
			t.Fatalf("a sign-out without a session: %d, want 303", w.Code)
		}
	}
	if n := strings.Count(buf.String(), `"msg":"admin call"`); n > 5 {
		t.Fatalf("%d audit lines for 500 sign-outs without a session from one peer, want at most 5:\n%.1000s", n, buf.String())
	}
}
