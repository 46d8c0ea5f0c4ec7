package admin_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/admin"
	"github.com/sluicehq/sluice/internal/clocktest"
	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/memstore"
)

const token = "s3cret-token"

// fakePlans is a PlanWriter in memory.
type fakePlans struct {
	mu        sync.Mutex
	plans     map[string]string
	tenants   map[string]string
	overrides map[string]string // tenant/name → limit@expiry
}

func newFakePlans() *fakePlans {
	return &fakePlans{plans: map[string]string{}, tenants: map[string]string{}, overrides: map[string]string{}}
}

func (f *fakePlans) SetPlan(_ context.Context, name string, limits []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.plans[name] = string(limits)
	return nil
}

func (f *fakePlans) AssignPlan(_ context.Context, tenant, plan string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.plans[plan]; !ok && plan != "" {
		return fmt.Errorf("plan %q: %w", plan, admin.ErrNotFound)
	}
	f.tenants[tenant] = plan
	return nil
}

func (f *fakePlans) SetOverride(_ context.Context, tenant, name string, limit []byte, exp time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.overrides[tenant+"/"+name] = string(limit) + "@" + exp.UTC().Format(time.RFC3339)
	return nil
}

func (f *fakePlans) ClearOverride(_ context.Context, tenant, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.overrides[tenant+"/"+name]; !ok {
		return fmt.Errorf("override: %w", admin.ErrNotFound)
	}
	delete(f.overrides, tenant+"/"+name)
	return nil
}

// fakeUsage is a ledger in memory.
type fakeUsage struct{ rows []admin.Entry }

func (f *fakeUsage) Usage(_ context.Context, key string) ([]admin.Period, error) {
	var out []admin.Period
	for _, r := range f.rows {
		if r.Key == key {
			out = append(out, r.Period)
		}
	}
	return out, nil
}

func (f *fakeUsage) Ledger(_ context.Context, from, to time.Time, each func(admin.Entry) error) error {
	for _, r := range f.rows {
		if !r.Start.Before(from) && r.Start.Before(to) {
			if err := each(r); err != nil {
				return err
			}
		}
	}
	return nil
}

type fixture struct {
	api   *admin.API
	srv   *httptest.Server
	plans *fakePlans
	log   *testlog.Buffer
	clock *clocktest.Clock
}

func newFixture(t *testing.T, cfg admin.Config) *fixture {
	t.Helper()
	f := &fixture{plans: newFakePlans(), log: &testlog.Buffer{}, clock: clocktest.At(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))}
	mem := memstore.New(memstore.Config{Clock: f.clock, SweepInterval: -1})
	t.Cleanup(func() { mem.Close() })
	if cfg.Limiter == nil {
		cfg.Limiter = mem
	}
	if cfg.Plans == nil {
		cfg.Plans = f.plans
	}
	if cfg.Usage == nil {
		cfg.Usage = &fakeUsage{}
	}
	if cfg.Keys == nil {
		cfg.Keys = webUsers{}
	}
	if cfg.Token == nil {
		cfg.Token = []byte(token)
	}
	cfg.Clock = f.clock
	cfg.Logger = slog.New(slog.NewJSONHandler(f.log, nil))
	f.api = admin.New(cfg)
	f.srv = httptest.NewServer(f.api)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) do(t *testing.T, method, path, auth, body string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return send(t, req)
}

// send sends req and returns the response's status, body and header.
func send(t *testing.T, req *http.Request) (int, string, http.Header) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// auditLines returns the audit log's lines, decoded.
func (f *fixture) auditLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.log.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

const limitJSON = `{"rate":3,"period":"1m"}`

// call is one request of every route, with a valid body.
var calls = []struct{ method, path, body string }{
	{"POST", "/v1/keys/peek", `{"key":"k","limit":` + limitJSON + `}`},
	{"POST", "/v1/keys/reset", `{"key":"k","limit":` + limitJSON + `}`},
	{"PUT", "/v1/plans/pro", `{"limits":{"api.tenant":` + limitJSON + `}}`},
	{"PUT", "/v1/tenants/acme/plan", `{"plan":"pro"}`},
	{"PUT", "/v1/tenants/acme/overrides/api.tenant", `{"limit":` + limitJSON + `}`},
	{"DELETE", "/v1/tenants/acme/overrides/api.tenant", ``},
	{"GET", "/v1/usage?key=k", ``},
	{"GET", "/v1/ledger?from=2026-01-01T00:00:00Z&to=2027-01-01T00:00:00Z&format=csv", ``},
	{"POST", "/v1/descriptors/peek", `{"domain":"web","entries":[{"key":"user","value":"alice"}]}`},
	{"POST", "/v1/descriptors/reset", `{"domain":"web","entries":[{"key":"user","value":"alice"}]}`},
	{"POST", "/v1/login-links", `{}`},
}

// Every route refuses a call without credentials (401 with
// WWW-Authenticate), with another scheme (401) and with a wrong token
// (403), before it reads the body or does anything.
func TestEveryRouteRefusesUnauthenticatedAndWrongToken(t *testing.T) {
	f := newFixture(t, admin.Config{})
	for _, c := range calls {
		code, body, h := f.do(t, c.method, c.path, "", c.body)
		if code != http.StatusUnauthorized || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") || !strings.Contains(body, "authentication required") {
			t.Errorf("%s %s without credentials: %d %q (WWW-Authenticate %q), want 401 with a Bearer challenge", c.method, c.path, code, body, h.Get("WWW-Authenticate"))
		}
		if code, _, _ := f.do(t, c.method, c.path, "Basic "+token, c.body); code != http.StatusUnauthorized {
			t.Errorf("%s %s with Basic: %d, want 401", c.method, c.path, code)
		}
		code, body, _ = f.do(t, c.method, c.path, "Bearer wrong-"+token, c.body)
		if code != http.StatusForbidden || !strings.Contains(body, "not accepted") {
			t.Errorf("%s %s with a wrong token: %d %q, want 403", c.method, c.path, code, body)
		}
		if code, _, _ := f.do(t, c.method, c.path, "Bearer "+token[:len(token)-1], c.body); code != http.StatusForbidden {
			t.Errorf("%s %s with a prefix of the token: %d, want 403", c.method, c.path, code)
		}
	}
	if len(f.plans.plans)+len(f.plans.tenants)+len(f.plans.overrides) != 0 {
		t.Errorf("refused calls changed plans: %+v", f.plans)
	}
}

// With no token configured, no token is accepted, the empty one included.
func TestNoTokenConfiguredAcceptsNone(t *testing.T) {
	f := newFixture(t, admin.Config{Token: []byte{}})
	if code, _, _ := f.do(t, "GET", "/v1/usage?key=k", "Bearer x", ""); code != http.StatusForbidden {
		t.Errorf("a bearer token with none configured: %d, want 403", code)
	}
}

// Malformed bodies are answered 400 with a message that names the
// problem, and a body over the limit 413.
func TestMalformedBodiesAre400WithAMessage(t *testing.T) {
	f := newFixture(t, admin.Config{MaxBodyBytes: 256})
	cases := []struct{ method, path, body, want string }{
		{"POST", "/v1/keys/peek", `{"key":"k"`, "malformed body"},
		{"POST", "/v1/keys/peek", `{"key":"k","limit":` + limitJSON + `,"extra":1}`, `unknown field`},
		{"POST", "/v1/keys/peek", `{"key":"k"}`, "limit is required"},
		{"POST", "/v1/keys/peek", `{"key":"","limit":` + limitJSON + `}`, "key"},
		{"POST", "/v1/keys/reset", `{"key":"k","limit":{"rate":0,"period":"1m"}}`, "rate"},
		{"POST", "/v1/keys/peek", `{"key":"k","limit":` + limitJSON + `} {}`, "after the JSON"},
		{"POST", "/v1/keys/peek", `{"key":"k","limit":` + limitJSON + `}}`, "after the JSON"},
		{"POST", "/v1/keys/peek", `{"key":"k","limit":` + limitJSON + `}]`, "after the JSON"},
		{"PUT", "/v1/plans/pro", `{"limits":{"x":{"rate":1,"period":"soon"}}}`, "period"},
		{"PUT", "/v1/plans/pro", `{}`, "limits: required"},
		{"PUT", "/v1/tenants/acme/plan", `{}`, "plan is required"},
		{"PUT", "/v1/tenants/acme/overrides/n", `{"limit":{"rate":1,"period":"1m","calendar":{"unit":"fortnight"}}}`, "fortnight"},
		{"PUT", "/v1/tenants/acme/overrides/n", `{"limit":` + limitJSON + `,"expires":"2020-01-01T00:00:00Z"}`, "not in the future"},
		{"PUT", "/v1/tenants/acme/overrides/n", `{"limit":` + limitJSON + `,"expires":"tomorrow"}`, "malformed body"},
		{"GET", "/v1/usage", ``, "key"},
		{"GET", "/v1/ledger?from=2026-01-01T00:00:00Z&to=2025-01-01T00:00:00Z", ``, "after from"},
		{"GET", "/v1/ledger?from=2026-01-01T00:00:00Z&to=2027-01-01T00:00:00Z&format=xml", ``, "csv or json"},
	}
	for _, c := range cases {
		code, body, h := f.do(t, c.method, c.path, "Bearer "+token, c.body)
		if code != http.StatusBadRequest || !strings.Contains(body, c.want) || h.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s %s: %d %q, want 400 with %q", c.method, c.path, c.body, code, body, c.want)
		}
	}
	big := `{"key":"` + strings.Repeat("k", 300) + `","limit":` + limitJSON + `}`
	if code, body, _ := f.do(t, "POST", "/v1/keys/peek", "Bearer "+token, big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over MaxBodyBytes: %d %q, want 413", code, body)
	}
}

// Every call, refused or served, is one audit line saying who, what, on
// what, and the result.
func TestEveryCallIsAudited(t *testing.T) {
	f := newFixture(t, admin.Config{})
	f.do(t, "PUT", "/v1/tenants/acme/overrides/api.tenant", "", `{"limit":`+limitJSON+`}`)
	f.do(t, "PUT", "/v1/tenants/acme/overrides/api.tenant", "Bearer nope", `{"limit":`+limitJSON+`}`)
	f.do(t, "PUT", "/v1/tenants/acme/overrides/api.tenant", "Bearer "+token, `{"limit":`+limitJSON+`}`)
	f.do(t, "PUT", "/v1/tenants/acme/plan", "Bearer "+token, `{"plan":"gold"}`)
	lines := f.auditLines(t)
	want := []struct {
		who    string
		status float64
		err    string
	}{{"anonymous", 401, "authentication required"}, {"bad-token", 403, "not accepted"}, {"token", 204, ""}, {"token", 404, "gold"}}
	if len(lines) != len(want) {
		t.Fatalf("%d audit lines, want %d: %v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l["msg"] != "admin call" || l["who"] != w.who || l["status"] != w.status || !strings.Contains(l["error"].(string), w.err) || l["remote"] == "" {
			t.Errorf("audit line %d: %v, want who=%s status=%v error~%q", i, l, w.who, w.status, w.err)
		}
	}
	if l := lines[2]; l["op"] != "PUT /v1/tenants/{tenant}/overrides/{name}" || l["target"] != "/v1/tenants/acme/overrides/api.tenant" {
		t.Errorf("audit of the override: op %v target %v", l["op"], l["target"])
	}
}

// Peek reads a key's state and spends nothing; reset gives back what it
// spent, so the key has its whole capacity again.
func TestPeekSpendsNothingAndResetRestoresTheCapacity(t *testing.T) {
	f := newFixture(t, admin.Config{})
	lim := sluice.Limit{Algorithm: sluice.FixedWindow, Rate: 3, Period: time.Minute, Burst: 3}
	mem := memstore.New(memstore.Config{Clock: f.clock, SweepInterval: -1})
	defer mem.Close()
	f = newFixture(t, admin.Config{Limiter: mem})
	for range 2 {
		if _, err := mem.Allow(context.Background(), "k", lim); err != nil {
			t.Fatal(err)
		}
	}
	peek := calls[0]
	for range 3 {
		code, body, _ := f.do(t, peek.method, peek.path, "Bearer "+token, peek.body)
		if code != 200 || !strings.Contains(body, `"remaining":1`) || !strings.Contains(body, `"capacity":3`) {
			t.Fatalf("peek: %d %s, want remaining 1 of 3", code, body)
		}
	}
	code, body, _ := f.do(t, "POST", "/v1/keys/reset", "Bearer "+token, peek.body)
	if code != 200 || !strings.Contains(body, `"remaining":3`) || !strings.Contains(body, `"refunded":2`) {
		t.Fatalf("reset: %d %s, want remaining 3, refunded 2", code, body)
	}
	if res, _ := mem.Peek(context.Background(), "k", lim); res.Remaining != 3 {
		t.Errorf("the store's key after reset: %+v, want 3 remaining", res)
	}
}

// Operations whose part is not configured answer 501, not 500 or a panic.
func TestUnconfiguredPartsAre501(t *testing.T) {
	f := newFixture(t, admin.Config{Limiter: noPeek{}, Plans: nil})
	f.api = admin.New(admin.Config{Limiter: noPeek{}, Token: []byte(token), Logger: slog.New(slog.DiscardHandler)})
	f.srv.Config.Handler = f.api
	for _, c := range calls {
		if code, body, _ := f.do(t, c.method, c.path, "Bearer "+token, c.body); code != http.StatusNotImplemented {
			t.Errorf("%s %s with nothing configured: %d %s, want 501", c.method, c.path, code, body)
		}
	}
}

type noPeek struct{}

func (noPeek) AllowN(context.Context, string, sluice.Limit, int) (sluice.Result, error) {
	return sluice.Result{}, nil
}

// A verified client certificate authenticates a call when ClientCerts is
// on, and is named in the audit line; without ClientCerts it does not.
func TestClientCertificateAuthenticates(t *testing.T) {
	chain := [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: "ops"}}}}
	for _, on := range []bool{true, false} {
		var buf bytes.Buffer
		api := admin.New(admin.Config{ClientCerts: on, Plans: newFakePlans(), Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
		r := httptest.NewRequest("DELETE", "/v1/tenants/a/overrides/n", nil)
		r.TLS = &tls.ConnectionState{VerifiedChains: chain}
		w := httptest.NewRecorder()
		api.ServeHTTP(w, r)
		want := http.StatusUnauthorized
		if on {
			want = http.StatusNotFound // authenticated; no such override
		}
		if w.Code != want {
			t.Errorf("ClientCerts %v: %d, want %d", on, w.Code, want)
		}
		if on && !strings.Contains(buf.String(), `"who":"cert:CN=ops"`) {
			t.Errorf("audit line %s does not name the certificate", buf.String())
		}
	}
}

// The ledger export streams every row in range, as CSV and as JSON, and
// usage lists a key's rows as the ledger holds them.
func TestUsageAndLedgerExport(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	u := &fakeUsage{}
	for i, k := range []string{"a", "b", "a"} {
		s := t0.AddDate(0, i, 0)
		u.rows = append(u.rows, admin.Entry{Key: k, Period: admin.Period{Start: s, End: s.AddDate(0, 1, 0), Count: int64(i + 1), Quota: 10, Updated: s}})
	}
	f := newFixture(t, admin.Config{Usage: u})
	code, body, _ := f.do(t, "GET", "/v1/usage?key=a", "Bearer "+token, "")
	var got struct{ Periods []admin.Period }
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || len(got.Periods) != 2 || got.Periods[1].Count != 3 {
		t.Errorf("usage of a: %d %s (%v)", code, body, err)
	}
	code, body, h := f.do(t, "GET", "/v1/ledger?from=2026-11-01T00:00:00Z&to=2027-01-01T00:00:00Z&format=csv", "Bearer "+token, "")
	wantCSV := "key,start,end,count,quota,updated\na,2026-11-01T00:00:00Z,2026-12-01T00:00:00Z,1,10,2026-11-01T00:00:00Z\nb,2026-12-01T00:00:00Z,2027-01-01T00:00:00Z,2,10,2026-12-01T00:00:00Z\n"
	if code != 200 || body != wantCSV || !strings.HasPrefix(h.Get("Content-Type"), "text/csv") {
		t.Errorf("CSV export: %d %q, want %q", code, body, wantCSV)
	}
	code, body, _ = f.do(t, "GET", "/v1/ledger?from=2026-11-01T00:00:00Z&to=2028-01-01T00:00:00Z", "Bearer "+token, "")
	var rows []admin.Entry
	if err := json.Unmarshal([]byte(body), &rows); code != 200 || err != nil || len(rows) != 3 || rows[2].Key != "a" || rows[2].Count != 3 {
		t.Errorf("JSON export: %d %s (%v)", code, body, err)
	}
	code, body, _ = f.do(t, "GET", "/v1/ledger?from=2030-01-01T00:00:00Z&to=2031-01-01T00:00:00Z", "Bearer "+token, "")
	if code != 200 || strings.TrimSpace(body) != "[]" {
		t.Errorf("an empty JSON export: %d %q, want []", code, body)
	}
}

// A page mounted with Handle is behind the same authentication and audit
// log as the API's own routes, and is not listed among them.
func TestHandleMountsAPageBehindTheSameAuthAndAudit(t *testing.T) {
	f := newFixture(t, admin.Config{})
	f.api.Handle("GET /live", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page") }))
	if code, _, _ := f.do(t, "GET", "/live", "", ""); code != http.StatusUnauthorized {
		t.Errorf("the page without a token: %d, want 401", code)
	}
	if code, body, _ := f.do(t, "GET", "/live", "Bearer "+token, ""); code != 200 || body != "page" {
		t.Errorf("the page with the token: %d %q", code, body)
	}
	lines := f.auditLines(t)
	if len(lines) != 2 || lines[1]["op"] != "GET /live" || lines[1]["who"] != "token" {
		t.Errorf("audit lines %v, want two, the second GET /live by token", lines)
	}
	for _, r := range f.api.Routes() {
		if strings.Contains(r, "/live") {
			t.Errorf("Routes lists the mounted page %s", r)
		}
	}
}
