package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/internal/daemon"
	"github.com/sluicehq/sluice/internal/keyhash"
)

// adminGet GETs url with the bearer token (none when ""), and returns its
// status and body.
func adminGet(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	resp, b := call(t, http.MethodGet, url, "", bearer(token))
	return resp.StatusCode, b
}

// tryProxyKey asks the proxy page's form for key's state under policy.
func tryProxyKey(t *testing.T, admin, token, policy, key string) page.TryResult {
	t.Helper()
	form := url.Values{"domain": {policy}, "descriptor": {"key=" + key}}
	hdr := bearer(token)
	hdr["Content-Type"] = "application/x-www-form-urlencoded"
	resp, b := call(t, http.MethodPost, admin+"/page/try?format=json", form.Encode(), hdr)
	var res page.TryResult
	if err := json.Unmarshal(b, &res); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the form: status %d, %v", resp.StatusCode, err)
	}
	return res
}

// launchProxyPage starts sluice proxy on proxyCfg (per_ip: 2 an hour) in
// front of an upstream that answers every request, with the admin
// listener's page behind token, and returns it and the config file's path.
func launchProxyPage(t *testing.T, token string, args ...string) (p *proxyRun, cfg string) {
	t.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	cfg, tokenFile, secretFile := filepath.Join(dir, "proxy.yaml"), filepath.Join(dir, "token"), filepath.Join(dir, "key-secret")
	writeFile(t, cfg, proxyCfg)
	writeFile(t, tokenFile, token+"\n")
	writeFile(t, secretFile, pageKeySecret+"\n")
	return launchProxy(t, append([]string{"-config", cfg, "-upstream", up.URL, "-admin-token-file", tokenFile, "-log-key-secret-file", secretFile}, args...)...), cfg
}

// pageKeySecret is the secret of the key hashes of the pages the tests
// launch (-log-key-secret-file), so that they know the hash of a key.
const pageKeySecret = "the-tests-page-key-secret"

// pageHash is the hash the tests' pages show of key.
func pageHash(key string) string { return keyhash.New([]byte(pageKeySecret)).Hash("", key) }

// The live page on a running proxy: behind the admin token (while
// /metrics and /healthcheck still answer without one), its counters move
// with the proxy's decisions, the client driven over its limit tops the
// list (hashed), and the form reads a client's state without spending.
func TestProxyLivePage(t *testing.T) {
	const token = "a-long-enough-admin-token"
	p, cfg := launchProxyPage(t, token)
	checkPageNeedsTheToken(t, p.admin)
	checkFormSpendsNothing(t, p, token)
	checkPageDataCountsTheProxy(t, p.admin, token, cfg)
}

// checkPageNeedsTheToken: the page and its data answer 401 without a token
// and 403 with a wrong one, while /metrics and /healthcheck answer anyone.
func checkPageNeedsTheToken(t *testing.T, admin string) {
	t.Helper()
	for _, path := range []string{"/page", "/page/data.json"} {
		if code, _ := adminGet(t, admin+path, ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d, want 401", path, code)
		}
		if code, _ := adminGet(t, admin+path, "not-the-token-at-all"); code != http.StatusForbidden {
			t.Errorf("GET %s with a wrong token: %d, want 403", path, code)
		}
	}
	if code, body := adminGet(t, admin+"/metrics", ""); code != 200 || !strings.Contains(string(body), "go_goroutines") {
		t.Errorf("/metrics without a token: %d, want 200 and the metrics", code)
	}
	if code, _ := adminGet(t, admin+"/healthcheck", ""); code != 200 {
		t.Errorf("/healthcheck without a token: %d, want 200", code)
	}
}

// checkFormSpendsNothing asks the form twice before any traffic (2 remain
// both times, an unknown policy matches nothing), then sends 5 requests
// on per_ip's 2 an hour: 2 pass, and the form then reads the client at
// its limit.
func checkFormSpendsNothing(t *testing.T, p *proxyRun, token string) {
	t.Helper()
	for range 2 {
		res := tryProxyKey(t, p.admin, token, "per_ip", "127.0.0.1")
		if !res.Matched || res.Code != "OK" || res.Remaining != 2 || res.AtLimit {
			t.Fatalf("the form for 127.0.0.1 before traffic: %+v, want matched, OK, 2 remaining", res)
		}
	}
	if res := tryProxyKey(t, p.admin, token, "no_such_policy", "x"); res.Matched {
		t.Errorf("the form matched an unknown policy: %+v", res)
	}
	var codes []int
	for range 5 {
		codes = append(codes, getStatus(t, p.url+"/api/x"))
	}
	if !slices.Equal(codes, []int{200, 200, 429, 429, 429}) {
		t.Fatalf("codes %v, want 2 admitted then refused (the form must spend nothing)", codes)
	}
	if res := tryProxyKey(t, p.admin, token, "per_ip", "127.0.0.1"); res.Remaining != 0 || !res.AtLimit {
		t.Errorf("the form for 127.0.0.1 after traffic: %+v, want 0 remaining, at the limit", res)
	}
}

// checkPageDataCountsTheProxy reads the page's data after
// checkFormSpendsNothing's traffic: per_ip with 2 allowed and 3 limited,
// the client's hashed key (never its IP) first in the top list, the
// config's source; and the page itself names per_ip.
func checkPageDataCountsTheProxy(t *testing.T, admin, token, cfg string) {
	t.Helper()
	code, body := adminGet(t, admin+"/page/data.json", token)
	var snap page.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil || code != 200 {
		t.Fatalf("data.json: %d %v: %s", code, err, body)
	}
	i := slices.IndexFunc(snap.Rules, func(r page.RuleRate) bool { return r.Rule == "per_ip" })
	if i < 0 || snap.Rules[i].Allowed != 2 || snap.Rules[i].Limited != 3 {
		t.Fatalf("rules %+v, want per_ip with 2 allowed and 3 limited", snap.Rules)
	}
	want := pageHash("per_ip:127.0.0.1") // the logs' hash too: one secret
	if !strings.Contains(string(body), "~") || want == sluice.HashKey("", "per_ip:127.0.0.1") {
		t.Fatalf("want a keyed hash, not the key's plain SHA-256")
	}
	if len(snap.Top) == 0 || snap.Top[0].Key != want || snap.Top[0].Count != 3 || snap.Top[0].Rule != "per_ip" {
		t.Errorf("top %+v, want per_ip's hashed key %s with 3 refusals first", snap.Top, want)
	}
	if strings.Contains(string(body), "127.0.0.1") {
		t.Error("the page's data holds the client's IP without -admin-raw-keys")
	}
	if snap.Config == nil || snap.Config.Source != cfg {
		t.Errorf("config %+v, want its source %s", snap.Config, cfg)
	}
	if code, html := adminGet(t, admin+"/page", token); code != 200 || !strings.Contains(string(html), "per_ip") {
		t.Errorf("GET /page with the token: %d, want 200 and the page naming per_ip", code)
	}
}

// Without a token or client CA the proxy's admin listener is as it was:
// /metrics and /healthcheck, and no page.
func TestProxyAdminWithoutTokenHasNoPage(t *testing.T) {
	t.Setenv(daemon.AdminTokenEnv, "")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	p := launchProxy(t, "-upstream", up.URL)
	if code, _ := adminGet(t, p.admin+"/page", ""); code != http.StatusNotFound {
		t.Errorf("GET /page without any admin auth configured: %d, want 404", code)
	}
	if code, _ := adminGet(t, p.admin+"/metrics", ""); code != 200 {
		t.Errorf("/metrics: %d, want 200", code)
	}
}

// Admin flags the proxy would not act on are refused: the page's flags
// (-admin-raw-keys, -admin-login-link) without a token or client CA (no
// page), and any admin flag with the admin listener off.
func TestProxyRefusesAdminFlagsNotActedOn(t *testing.T) {
	t.Setenv(daemon.AdminTokenEnv, "")
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, "a-long-enough-admin-token\n")
	for _, args := range [][]string{
		{"-admin-raw-keys"},
		{"-admin-login-link=false"},
		{"-admin-addr", "", "-admin-token-file", tokenFile},
		{"-admin-addr", "", "-admin-raw-keys"},
	} {
		var out, errb strings.Builder
		args = append([]string{"-upstream", "http://127.0.0.1:1", "-listen", "127.0.0.1:0"}, args...)
		// Bounded: a flag no longer refused would leave the proxy serving.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		code := runProxy(ctx, args, &out, &errb)
		cancel()
		if code != 2 || !strings.Contains(errb.String(), "-admin-") {
			t.Errorf("sluice proxy %s: exit %d, want 2 naming the flag: %s", strings.Join(args, " "), code, errb.String())
		}
	}
}

// With -log-format json the proxy's banner line carries the login link
// (login), as the text banner does, and none with -admin-login-link=false.
func TestProxyJSONBannerHasTheLoginLink(t *testing.T) {
	const token = "a-long-enough-admin-token"
	for _, tc := range []struct {
		args []string
		link bool
	}{{[]string{"-log-format", "json"}, true}, {[]string{"-log-format", "json", "-admin-login-link=false"}, false}} {
		p, _ := launchProxyPage(t, token, tc.args...)
		var banner struct {
			Msg         string `json:"@message"`
			Page, Login string
		}
		for line := range strings.Lines(p.stdout.String()) {
			if json.Unmarshal([]byte(line), &banner) == nil && banner.Msg == "proxying" {
				break
			}
		}
		if banner.Msg != "proxying" || banner.Page == "" {
			t.Fatalf("%v: no JSON banner with the page: %s", tc.args, p.stdout.String())
		}
		if got := strings.HasPrefix(banner.Login, p.admin+"/") && strings.Contains(banner.Login, "code="); got != tc.link {
			t.Errorf("%v: login %q, want a link: %v", tc.args, banner.Login, tc.link)
		}
	}
}
