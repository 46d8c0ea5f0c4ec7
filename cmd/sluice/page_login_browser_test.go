//go:build unix

package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// loginLink returns the one-time login link serve logged at start-up.
func loginLink(t *testing.T, log string) string {
	t.Helper()
	m := regexp.MustCompile(`login="?(http://127\.0\.0\.1:\d+/login\?code=[A-Za-z0-9_-]+)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no login link in the log: %s", log)
	}
	return m[1]
}

// The documented way into the live page from a cold browser (no token
// header, no client certificate): the login link serve logs at start-up.
// It opens the page, which goes live; the session cookie is HttpOnly,
// SameSite=Strict and scoped to /page; the link a second time is refused;
// a page of another site that sends the browser to the page's data gets
// 401 (the cookie is not sent), while the operator's own navigation gets
// the data.
func TestLivePageOpensFromTheLoginLinkInAColdBrowser(t *testing.T) {
	t.Parallel() // waits on Chromium and serve; touches no process-wide state
	ctx, consoleErrors := browser(t, "")
	s, pageURL, _ := launchPage(t, "a-long-enough-admin-token")
	link := loginLink(t, s.stderr.String())

	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	if body := evalJS[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "sign in at /login") {
		t.Errorf("the page from a cold browser before signing in shows %q, want the 401 pointing to /login", body)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	// The sign-in page moves on to /page by itself (a same-origin
	// refresh, so that the Strict cookie goes with it even when the link
	// was followed from another site): wait until it has.
	deadline := time.Now().Add(30 * time.Second)
	for {
		path, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.readyState === "complete" ? location.pathname : ""`))
		if err == nil && path == "/page" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sign-in page did not move on to /page: at %q (%v)", path, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitJS(t, ctx, "the live page after the link", `location.pathname === "/page" && document.getElementById("live") !== null && document.getElementById("live").textContent === "Live."`)

	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	var session *network.Cookie
	for _, c := range cookies.Cookies {
		if c.Name == "sluice_session" {
			session = c
		}
	}
	if session == nil || !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict || session.Path != "/page" || session.Secure {
		t.Errorf("the session cookie %+v: want HttpOnly, SameSite=Strict, Path=/page (not Secure on plain HTTP)", session)
	}
	if got := evalJS[string](t, ctx, `document.cookie`); strings.Contains(got, "sluice_session") {
		t.Error("a script of the page reads the session cookie")
	}

	if err := chromedp.Do(ctx, chromedp.Navigate(link)); err != nil {
		t.Fatal(err)
	}
	if body := evalJS[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "used already or has expired") {
		t.Errorf("the link a second time shows %q, want it refused", body)
	}

	// Another site (localhost is not 127.0.0.1's site) sends the browser
	// to the page's data: the Strict cookie stays home.
	data := strings.TrimSuffix(pageURL, "/page") + "/page/data.json"
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><a id="go" href="%s">go</a>`, data)
	}))
	defer evil.Close()
	u, _ := url.Parse(evil.URL)
	if err := chromedp.Do(ctx, chromedp.Navigate("http://localhost:"+u.Port()+"/"), chromedp.Click(chromedp.ID("go"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the page's data after another site's link", fmt.Sprintf(`location.href === %q && document.body.innerText.length > 0`, data))
	if body := evalJS[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "authentication required") {
		t.Errorf("the page's data reached from another site shows %q, want 401 (the session cookie not sent)", body)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(data)); err != nil {
		t.Fatal(err)
	}
	if body := evalJS[string](t, ctx, `document.body.innerText`); !strings.Contains(body, `"rules"`) {
		t.Errorf("the page's data opened by the operator shows %q, want the data", body)
	}
	_ = consoleErrors // the refusals above log resource errors by design
}

// The page's "Log out" button ends a browser's session: the browser lands
// on the sign-in form with no session cookie left, the page is 401 to it
// again, and the old cookie, sent by anyone who kept it, no longer opens
// the page.
func TestLivePageLogsOutInABrowser(t *testing.T) {
	ctx, _ := browser(t, "")
	s, pageURL, _ := launchPage(t, "a-long-enough-admin-token")
	if err := chromedp.Do(ctx, chromedp.Navigate(loginLink(t, s.stderr.String()))); err != nil {
		t.Fatal(err)
	}
	waitAcross(t, ctx, "the live page after the link", `location.pathname === "/page" && document.getElementById("logout-button") !== null`)
	session := func() string {
		cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cookies.Cookies {
			if c.Name == "sluice_session" {
				return c.Value
			}
		}
		return ""
	}
	old := session()
	if old == "" {
		t.Fatal("no session cookie after the link")
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("logout-button"))); err != nil {
		t.Fatal(err)
	}
	waitAcross(t, ctx, "the sign-in form after Log out", `location.pathname === "/login" && document.getElementById("login") !== null`)
	if c := session(); c != "" {
		t.Errorf("the browser still holds a session cookie after Log out: %q", c)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	if body := evalJS[string](t, ctx, `document.body.innerText`); !strings.Contains(body, "sign in at /login") {
		t.Errorf("the page after Log out shows %q, want the 401 pointing to /login", body)
	}
	req, _ := http.NewRequest("GET", pageURL, nil)
	req.Header.Set("Cookie", "sluice_session="+old)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("the old session cookie after Log out: %d, want 401 (the session is forgotten)", resp.StatusCode)
	}
}

// waitAcross waits until expr is true in the browser, as waitJS does, but
// through navigations: an evaluation that fails because the document it
// ran in went away (a redirect, a refresh) is tried again.
func waitAcross(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.readyState === "complete" && (`+expr+`)`))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a browser, not passing time
	}
}
