package admin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admin"
)

// sessionFixture is an API with browser sign-in for /page, where a page
// answers "the page".
func sessionFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, admin.Config{SessionPaths: "/page"})
	f.api.Handle("GET /page", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "the page") }))
	return f
}

// get sends a GET to f's server with the header pairs, not following
// redirects.
func (f *fixture) get(t *testing.T, target string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.noRedirect(t, req, header...)
}

// noRedirect sends req with header's name and value pairs set, without
// following redirects, and returns the response, its body closed.
func (f *fixture) noRedirect(t *testing.T, req *http.Request, header ...string) *http.Response {
	t.Helper()
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	c := f.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func sessionCookie(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == admin.SessionCookie {
			return c
		}
	}
	return nil
}

// A login link opens once: it sets an HttpOnly, SameSite=Strict session
// cookie scoped to the page (not Secure on plain HTTP), which opens the
// page and nothing else (a reset is still 401) and is refused when a
// browser says another site sent the request; the link a second time is
// refused, and the audit log never holds its code.
func TestLoginLinkOpensOnceAndItsCookieOpensOnlyThePage(t *testing.T) {
	f := sessionFixture(t)
	link, exp := f.api.LoginLink(f.srv.URL)
	if want := f.clock.Now().Add(admin.LoginLinkTTL); !exp.Equal(want) {
		t.Errorf("the link expires %v, want %v", exp, want)
	}
	resp := f.get(t, link)
	c := sessionCookie(resp)
	if resp.StatusCode != 200 || c == nil {
		t.Fatalf("the link: %d, cookie %v; want 200 and a session cookie", resp.StatusCode, c)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/page" || c.Secure || c.MaxAge != int(admin.SessionTTL/time.Second) {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/page, not Secure on HTTP, Max-Age %v", c, admin.SessionTTL)
	}
	cookie := admin.SessionCookie + "=" + c.Value
	if r := f.get(t, f.srv.URL+"/page", "Cookie", cookie, "Sec-Fetch-Site", "none"); r.StatusCode != 200 {
		t.Errorf("the page with the session: %d, want 200", r.StatusCode)
	}
	if code, body, _ := f.doCookie(t, "POST", "/v1/keys/reset", cookie, calls[1].body); code != http.StatusUnauthorized {
		t.Errorf("a reset with the page's session: %d %s, want 401 (a session opens the page only)", code, body)
	}
	for _, site := range []string{"cross-site", "same-site"} {
		if r := f.get(t, f.srv.URL+"/page", "Cookie", cookie, "Sec-Fetch-Site", site); r.StatusCode != http.StatusForbidden {
			t.Errorf("the page with the session, Sec-Fetch-Site %s: %d, want 403", site, r.StatusCode)
		}
	}
	for _, sneaky := range []string{"/page/../v1/keys/reset", "/page/%2e%2e/v1/keys/reset", "/page%2F..%2Fv1%2Fkeys%2Freset"} {
		if code, body, _ := f.doCookie(t, "POST", sneaky, cookie, calls[1].body); code < 300 || code == http.StatusNotFound && strings.Contains(body, "remaining") {
			t.Errorf("POST %s with the page's session: %d %s, want it refused", sneaky, code, body)
		}
	}
	if r := f.get(t, link); r.StatusCode != http.StatusForbidden || sessionCookie(r) != nil {
		t.Errorf("the link a second time: %d (cookie %v), want 403 and no cookie", r.StatusCode, sessionCookie(r))
	}
	if r := f.get(t, f.srv.URL+"/page", "Cookie", admin.SessionCookie+"=forged"); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("the page with a forged session: %d, want 401", r.StatusCode)
	}
	code := link[strings.Index(link, "code=")+5:]
	if strings.Contains(f.log.String(), code) {
		t.Error("the audit log holds the login link's code")
	}
}

// doCookie is do with a Cookie header instead of a token.
func (f *fixture) doCookie(t *testing.T, method, path, cookie, body string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Cookie", cookie)
	req.Header.Set("Content-Type", "application/json")
	return send(t, req)
}

// A link past its 5 minutes is refused, and so is the oldest of more
// links than MaxLoginLinks waiting at once; a session ends after
// SessionTTL.
func TestLoginLinksExpireAndAreBounded(t *testing.T) {
	f := sessionFixture(t)
	old, _ := f.api.LoginLink(f.srv.URL)
	f.clock.Advance(admin.LoginLinkTTL + time.Second)
	if r := f.get(t, old); r.StatusCode != http.StatusForbidden {
		t.Errorf("a link 5m1s old: %d, want 403", r.StatusCode)
	}
	first, _ := f.api.LoginLink(f.srv.URL)
	var last string
	for range admin.MaxLoginLinks {
		f.clock.Advance(time.Millisecond)
		last, _ = f.api.LoginLink(f.srv.URL)
	}
	if r := f.get(t, first); r.StatusCode != http.StatusForbidden {
		t.Errorf("the oldest of %d links: %d, want 403", admin.MaxLoginLinks+1, r.StatusCode)
	}
	r := f.get(t, last)
	if r.StatusCode != 200 {
		t.Fatalf("the newest link: %d, want 200", r.StatusCode)
	}
	cookie := admin.SessionCookie + "=" + sessionCookie(r).Value
	f.clock.Advance(admin.SessionTTL)
	if r := f.get(t, f.srv.URL+"/page", "Cookie", cookie); r.StatusCode != http.StatusUnauthorized {
		t.Errorf("the page with a session %v old: %d, want 401", admin.SessionTTL, r.StatusCode)
	}
}

// On a TLS listener the session cookie is Secure; the link minted through
// the API (with the token) is on the host the call reached.
func TestSessionCookieIsSecureOnTLSAndLinksAreMintedWithTheToken(t *testing.T) {
	f := sessionFixture(t)
	f.srv.Close()
	f.srv = httptest.NewTLSServer(f.api)
	t.Cleanup(f.srv.Close)
	http.DefaultClient.Transport = f.srv.Client().Transport
	t.Cleanup(func() { http.DefaultClient.Transport = nil })
	code, body, _ := f.do(t, "POST", admin.LoginLinksPath, "Bearer "+token, "{}")
	if code != 200 || !strings.Contains(body, f.srv.URL+"/login?code=") {
		t.Fatalf("POST %s: %d %s, want 200 and a link on %s", admin.LoginLinksPath, code, body, f.srv.URL)
	}
	if code, _, _ := f.do(t, "POST", admin.LoginLinksPath, "", "{}"); code != http.StatusUnauthorized {
		t.Errorf("minting a link without the token: %d, want 401", code)
	}
	link, _ := f.api.LoginLink(f.srv.URL)
	r := f.get(t, link)
	if c := sessionCookie(r); c == nil || !c.Secure {
		t.Errorf("the cookie over TLS: %+v, want Secure", c)
	}
}

// The token form signs a browser in with the admin token (303 to the
// page, a session cookie); a wrong token, and the form posted from
// another site, are refused 403 without a cookie.
func TestTokenFormSignsInAndRefusesOtherSites(t *testing.T) {
	f := sessionFixture(t)
	post := func(tok string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("POST", f.srv.URL+admin.LoginPath, strings.NewReader(url.Values{"token": {tok}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return f.noRedirect(t, req, header...)
	}
	if r := post(token, "Sec-Fetch-Site", "same-origin"); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/page" || sessionCookie(r) == nil {
		t.Errorf("the form with the token: %d to %q, cookie %v; want 303 to /page with a session", r.StatusCode, r.Header.Get("Location"), sessionCookie(r))
	}
	if r := post("not-the-token"); r.StatusCode != http.StatusForbidden || sessionCookie(r) != nil {
		t.Errorf("the form with a wrong token: %d, want 403 and no cookie", r.StatusCode)
	}
	if r := post(token, "Sec-Fetch-Site", "cross-site"); r.StatusCode != http.StatusForbidden || sessionCookie(r) != nil {
		t.Errorf("the form posted from another site: %d, want 403 and no cookie", r.StatusCode)
	}
	if r := f.get(t, f.srv.URL+admin.LoginPath); r.StatusCode != 200 {
		t.Errorf("GET %s: %d, want the form", admin.LoginPath, r.StatusCode)
	}
}

// A POST to /page/logout ends the session: it answers 303 to the sign-in
// page with the cookie cleared (same scope and flags), and the old cookie
// no longer opens the page, whatever the browser does with the clearing.
// A GET is 405 and a sign-out another site sends is 403, both leaving the
// session live; the sign-out is in the audit log under the session.
func TestLogoutForgetsTheSessionAndClearsItsCookie(t *testing.T) {
	f := sessionFixture(t)
	signIn := func() string {
		t.Helper()
		link, _ := f.api.LoginLink(f.srv.URL)
		c := sessionCookie(f.get(t, link))
		if c == nil {
			t.Fatal("the link set no session cookie")
		}
		return admin.SessionCookie + "=" + c.Value
	}
	logout := func(method, cookie string, header ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, f.srv.URL+"/page"+admin.LogoutPath, nil)
		return f.noRedirect(t, req, append([]string{"Cookie", cookie}, header...)...)
	}
	opens := func(cookie string) int {
		return f.get(t, f.srv.URL+"/page", "Cookie", cookie, "Sec-Fetch-Site", "same-origin").StatusCode
	}

	cookie := signIn()
	if r := logout("GET", cookie); r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "POST" {
		t.Errorf("GET logout: %d (Allow %q), want 405 with Allow: POST", r.StatusCode, r.Header.Get("Allow"))
	}
	for _, h := range [][]string{{"Sec-Fetch-Site", "cross-site"}, {"Origin", "https://evil.example"}} {
		if r := logout("POST", cookie, h...); r.StatusCode != http.StatusForbidden || sessionCookie(r) != nil {
			t.Errorf("logout sent with %v: %d, cookie %v; want 403 and no cookie", h, r.StatusCode, sessionCookie(r))
		}
	}
	if c := opens(cookie); c != 200 {
		t.Fatalf("the session after refused logouts: %d, want 200 (still live)", c)
	}
	r := logout("POST", cookie, "Sec-Fetch-Site", "same-origin")
	c := sessionCookie(r)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != admin.LoginPath {
		t.Errorf("logout: %d to %q, want 303 to %s", r.StatusCode, r.Header.Get("Location"), admin.LoginPath)
	}
	if c == nil || c.Value != "" || c.MaxAge >= 0 || c.Path != "/page" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
		t.Errorf("logout's cookie %+v: want it cleared (empty, Max-Age<0) on Path=/page, HttpOnly, SameSite=Strict", c)
	}
	if code := opens(cookie); code != http.StatusUnauthorized {
		t.Errorf("the old cookie after logout: %d, want 401 (the session is forgotten)", code)
	}
	if !regexp.MustCompile(`"who":"session:[^"]+".*"op":"POST /page/logout".*"status":303`).MatchString(f.log.String()) {
		t.Errorf("no audit line of the logout by its session:\n%s", f.log.String())
	}
	if r := logout("POST", cookie, "Sec-Fetch-Site", "same-origin"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("logout again with the dead cookie: %d, want 303 (nothing to end)", r.StatusCode)
	}
	if other := signIn(); opens(other) != 200 {
		t.Error("a new session after a logout does not open the page")
	}
}
