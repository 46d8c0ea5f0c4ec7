package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/gateway"
	"github.com/sluicehq/sluice/internal/clocktest"
)

// pathForms are the spellings of /login a client could try, and the
// path_semantics whose upstreams serve each as /login (see
// request.PathSemantics for the servers each stands for).
var pathForms = []struct {
	target string
	folds  string // the semantics, space-separated
}{
	{"/LOGIN", "case_insensitive iis"},
	{"/Login", "case_insensitive iis"},
	{"/login;x", "servlet"},
	{"/login%3Bx", "servlet"},
	{"/login%20", "iis servlet"},
	{"/login%09", "servlet"},
	{"/login.", "iis"},
	{"/LOGIN;x", ""},
	{"/log%20in", ""},
}

// Each spelling of /login spends /login's limit exactly when the route's
// upstream serves it as /login: under strict, none does (and a strict
// upstream serves none of them as /login); under the others, those its
// server folds. Before path_semantics, each was a fresh allowance on
// every upstream (an unmatched request: 200 after /login's one request).
func TestPathFormsSpendTheLimitOfThePathTheUpstreamServes(t *testing.T) {
	for _, sem := range []string{"strict", "case_insensitive", "iis", "servlet"} {
		for _, form := range pathForms {
			t.Run(sem+form.target, func(t *testing.T) {
				up := newUpstream(t)
				cfg := parsed(t, fmt.Sprintf(`
path_semantics: %s
limits: [{name: l, key: global, rate: 1r/h, algorithm: token_bucket}]
routes:
  - {name: login, match: /login, limits: [l]}
`, sem), up)
				_, srv := front(t, cfg)
				if code := doRaw(t, srv.URL, srv.Client(), "POST", "/login", "").StatusCode; code != http.StatusOK {
					t.Fatalf("/login: %d", code)
				}
				want := http.StatusOK
				if strings.Contains(" "+form.folds+" ", " "+sem+" ") {
					want = http.StatusTooManyRequests
				}
				if code := doRaw(t, srv.URL, srv.Client(), "POST", form.target, "").StatusCode; code != want {
					t.Errorf("path_semantics %s: %s after /login's one request: %d, want %d", sem, form.target, code, want)
				}
			})
		}
	}
}

// Semantics are per upstream: an iis upstream's routes count /LOGIN as
// /login and /CART/Items as under /cart/, and the request goes to that
// upstream as sent; a strict upstream's routes beside them match as
// before. With a strict catch-all, a spelling that it matches as written
// goes there, as it did before path_semantics, and spends nothing of the
// shop's limits: the shop never serves it.
func TestPathSemanticsPerUpstream(t *testing.T) {
	type step struct {
		target string
		code   int
		to     string // "site", "shop" or "" (refused)
	}
	for _, tc := range []struct {
		catchAll bool
		steps    []step
	}{
		{false, []step{
			{"/LOGIN", 200, "shop"}, // spends login's one request
			{"/login", 429, ""},
			{"/Login.", 429, ""},
			{"/CART/Items", 200, "shop"},
			{"/static/x", 200, "site"},
			{"/STATIC/x", 200, "site"}, // the strict route does not match: the fallback, the first upstream
		}},
		{true, []step{
			{"/LOGIN", 200, "site"}, // the catch-all's, as written
			{"/login", 200, "shop"}, // login's one request
			{"/login", 429, ""},
			{"/Login.", 200, "site"},
			{"/CART/Items", 200, "site"},
			{"/cart/items", 200, "shop"},
		}},
	} {
		t.Run(fmt.Sprint("catch-all=", tc.catchAll), func(t *testing.T) {
			site, shop := newUpstream(t), newUpstream(t)
			all := ""
			if tc.catchAll {
				all = "  - {name: all, match: /, upstream: site}\n"
			}
			f, err := gateway.ParseFile("proxy.yaml", []byte(fmt.Sprintf(`
upstreams:
  - {name: site, url: %s}
  - {name: shop, url: %s, path_semantics: iis}
limits: [{name: l, key: global, rate: 1r/h, algorithm: token_bucket}]
routes:
%s  - {name: static, match: /static/, upstream: site}
  - {name: login, match: /login, upstream: shop, limits: [l]}
  - {name: cart, match: /cart/, upstream: shop}
`, site.URL, shop.URL, all)))
			if err != nil {
				t.Fatal(err)
			}
			f.Config.Limiter = store(t, clocktest.New())
			var (
				mu   sync.Mutex
				sent []string
			)
			record := func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				sent = append(sent, r.URL.EscapedPath())
				mu.Unlock()
				io.WriteString(w, "ok")
			}
			site.set(record)
			shop.set(record)
			_, srv := front(t, f.Config)
			var wantSent []string
			for i, st := range tc.steps {
				before := [2]int64{site.hits.Load(), shop.hits.Load()}
				if code := doRaw(t, srv.URL, srv.Client(), "GET", st.target, "").StatusCode; code != st.code {
					t.Errorf("step %d: %s: %d, want %d", i, st.target, code, st.code)
				}
				got := [2]int64{site.hits.Load() - before[0], shop.hits.Load() - before[1]}
				want := [2]int64{}
				switch st.to {
				case "site":
					want[0] = 1
				case "shop":
					want[1] = 1
				}
				if st.to != "" {
					wantSent = append(wantSent, st.target)
				}
				if got != want {
					t.Errorf("step %d: %s reached (site, shop) %v times, want %v", i, st.target, got, want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(sent, " ") != strings.Join(wantSent, " ") {
				t.Errorf("the upstreams received %q; want %q, as sent", sent, wantSent)
			}
		})
	}
}

// A pattern that its upstream's semantics never lets match (a folded
// path has no upper case, no ";", no trailing dot) is refused with its
// line, as is a semantics that does not exist.
func TestPathSemanticsRefusesPatternsThatNeverMatch(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"path_semantics: case_insensitive\nroutes: [{name: r, match: /Login}]", `proxy.yaml:3:27: config: pattern "/Login" never matches: its upstream reads paths as case_insensitive, to which "Login" is not a path segment; write "/login"`},
		{"path_semantics: servlet\nroutes: [{name: r, match: [/a, \"/b;v=1/{x}\"]}]", `proxy.yaml:3:32: config: pattern "/b;v=1/{x}" never matches: its upstream reads paths as servlet, to which "b;v=1" is not a path segment; write "/b/{x}"`},
		{"path_semantics: iis\nroutes: [{name: r, match: \"GET /a/x.\"}]", `pattern "GET /a/x." never matches`},
		{"path_semantics: tomcat", `proxy.yaml:2:17: config: path_semantics "tomcat": want strict, case_insensitive, iis or servlet`},
		{"upstreams: [{name: a, url: \"http://a\", path_semantics: IIS}]", `path_semantics "IIS": want`},
	} {
		_, err := gateway.ParseFile("proxy.yaml", []byte("upstream: http://127.0.0.1:1\n"+tc.yaml))
		if tc.yaml[0] == 'u' {
			_, err = gateway.ParseFile("proxy.yaml", []byte(tc.yaml))
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant %s", tc.yaml, err, tc.want)
		}
	}
	// New refuses it too, for a Config built in Go.
	up := newUpstream(t)
	cfg := direct(t, up)
	cfg.Upstreams[0].PathSemantics = 1 // case_insensitive
	cfg.Routes = []gateway.Route{{Name: "r", Patterns: []string{"/Login"}}}
	if _, err := gateway.New(cfg); err == nil || !strings.Contains(err.Error(), "never matches") {
		t.Errorf("New with /Login under case_insensitive: %v", err)
	}
}

// A route that a request matches as written takes it, as before
// path_semantics; when its upstream folds paths, the routes of the path
// it serves apply their limits too: Tomcat serves /admin;jsessionid=1,
// which its catch-all /{page} matches as written, as /admin, so /admin's
// limit applies. Before, it was a fresh allowance (200 after /admin's one
// request).
func TestPathSemanticsFoldedPathSpendsTheLimitBehindACatchAll(t *testing.T) {
	portal := newUpstream(t)
	f, err := gateway.ParseFile("proxy.yaml", []byte(fmt.Sprintf(`
upstreams: [{name: portal, url: %s, path_semantics: servlet}]
limits: [{name: l, key: global, rate: 1r/h, algorithm: token_bucket}]
routes:
  - {name: page, match: "/{page}"}
  - {name: admin, match: /admin, limits: [l]}
`, portal.URL)))
	if err != nil {
		t.Fatal(err)
	}
	f.Config.Limiter = store(t, clocktest.New())
	_, srv := front(t, f.Config)
	for i, st := range []struct {
		target string
		code   int
	}{
		{"/admin", 200},
		{"/admin;jsessionid=1", 429},
		{"/x/..;/admin", 429},
		{"/ADMIN", 200}, // servlet paths keep their case
		{"/home;jsessionid=1", 200},
	} {
		if code := doRaw(t, srv.URL, srv.Client(), "GET", st.target, "").StatusCode; code != st.code {
			t.Errorf("step %d: %s: %d, want %d", i, st.target, code, st.code)
		}
	}
	if got := portal.hits.Load(); got != 3 {
		t.Errorf("portal reached %d times, want 3", got)
	}
}
