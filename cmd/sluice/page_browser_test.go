//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// browserPath finds Chromium: a missing one skips the test, loudly, or
// fails it with SLUICE_REQUIRE_BROWSER=1 (as CI sets).
func browserPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("SLUICE_REQUIRE_BROWSER") == "1" {
		t.Fatal("no Chromium on PATH (chromium, chromium-browser, google-chrome) and SLUICE_REQUIRE_BROWSER=1")
	}
	t.Skip("SKIPPED: no Chromium on PATH (install Debian's chromium, or set SLUICE_REQUIRE_BROWSER=1 to fail instead)")
	return ""
}

// browser starts headless Chromium for the test and returns its tab's
// context, sending the admin token with every request (none for ""), and
// the page's console errors so far.
func browser(t *testing.T, token string) (context.Context, func() []string) {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath(t)), chromedp.NoSandbox, chromedp.Headless,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1100, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })

	var mu sync.Mutex
	var errs []string
	console := chromedp.Console(ctx) // subscribed before the first navigation
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("starting Chromium: %v", err)
	}
	go func() {
		for m, err := range console {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				mu.Lock()
				errs = append(errs, m.String())
				mu.Unlock()
			}
		}
	}()
	if token == "" { // a cold browser: no credentials of its own
		return ctx, consoleErrs(&mu, &errs)
	}
	if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
		Headers: network.Headers{"Authorization": "Bearer " + token},
	}); err != nil {
		t.Fatal(err)
	}
	return ctx, consoleErrs(&mu, &errs)
}

// consoleErrs returns the console errors in *errs so far.
func consoleErrs(mu *sync.Mutex, errs *[]string) func() []string {
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), *errs...)
	}
}

// waitJS waits until the JavaScript expression is true in the page.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		if err == nil {
			return
		}
		// A poll begun while a click's navigation was still under way
		// loses its page ("Inspected target navigated or closed"): poll
		// the new one.
		if navigated(err) && time.Now().Before(deadline) {
			continue
		}
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string]("document.querySelector('main') ? document.querySelector('main').innerText : ''"))
		t.Fatalf("waiting for %s: %v\nthe page shows:\n%s", what, err, html)
	}
}

// navigated reports whether err is a script's page going away under it.
func navigated(err error) bool {
	s := err.Error()
	return strings.Contains(s, "navigated or closed") || strings.Contains(s, "Execution context was destroyed") ||
		strings.Contains(s, "Cannot find context with specified id")
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// pageCfg's limits are token buckets of an hour: a fixed window of a
// minute reset under a test that crossed the minute (bob's 2 spent came
// back as 3 remaining), and a bucket refills one request in 20 minutes.
const pageCfg = `domain: web
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 3, algorithm: token_bucket}
  - key: path
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1, algorithm: token_bucket}
`

func webReq(key, value string) string {
	return fmt.Sprintf(`{"domain":"web","descriptors":[{"entries":[{"key":%q,"value":%q}]}]}`, key, value)
}

// The live page in a real browser, against a running serve: it loads
// without console errors, its counters move with the traffic the test
// sends, the key driven over its limit tops the list (hashed), the form
// shows a key's state and spends nothing, the page fits 390 px without
// horizontal scrolling, and a screenshot is saved
// (SLUICE_PAGE_SCREENSHOT=dir to keep it; docs/page.png is one).
func TestLivePageInABrowser(t *testing.T) {
	t.Parallel() // waits on Chromium and serve; touches no process-wide state
	const token = "a-long-enough-admin-token"
	ctx, consoleErrors := browser(t, token)
	s, pageURL, cfg := launchPage(t, token)

	if err := chromedp.Do(ctx, chromedp.Navigate(pageURL)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the event stream", `document.getElementById("live").textContent === "Live."`)
	if got := evalJS[string](t, ctx, `document.querySelector("#config").innerText`); !strings.Contains(got, "web.user") || !strings.Contains(got, cfg) {
		t.Errorf("the config section shows %q, want web.user from %s", got, cfg)
	}

	// Traffic: alice 5 times on 3 an hour (2 refused), bob twice, one
	// shadow refusal on path.
	var codes []int
	for range 5 {
		codes = append(codes, post(t, s.url, webReq("user", "alice")))
	}
	codes = append(codes, post(t, s.url, webReq("user", "bob")), post(t, s.url, webReq("user", "bob")))
	codes = append(codes, post(t, s.url, webReq("path", "/x")), post(t, s.url, webReq("path", "/x")))
	if fmt.Sprint(codes) != "[200 200 200 429 429 200 200 200 200]" {
		t.Fatalf("codes %v", codes)
	}
	waitJS(t, ctx, "the counters of web.user (5 allowed, 2 limited)",
		`[...document.querySelectorAll("#rules tbody tr")].some(r => r.cells[0].textContent === "web.user" && r.cells[4].textContent === "5" && r.cells[5].textContent === "2")`)
	waitJS(t, ctx, "the shadow refusal of web.path",
		`[...document.querySelectorAll("#rules tbody tr")].some(r => r.cells[0].textContent === "web.path" && r.cells[6].textContent === "1")`)
	alice := pageHash(service.StoreKey("", "web", []config.Entry{{Key: "user", Value: "alice"}}))
	waitJS(t, ctx, "alice's hashed key at the top of the list",
		fmt.Sprintf(`(r => r && r.cells[0].textContent === %q && r.cells[2].textContent === "2")(document.querySelector("#top tbody tr"))`, alice))
	if body := evalJS[string](t, ctx, `document.body.innerText`); strings.Contains(body, "alice") {
		t.Error("the page shows alice's raw key without -admin-raw-keys")
	}

	// The form, twice for bob (2 of 3 spent): remaining 1 both times, and
	// bob's next request is still admitted, the one after refused.
	try := func(domain, desc string) {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.SetValue(chromedp.ID("try-domain"), domain),
			chromedp.SetValue(chromedp.ID("try-descriptor"), desc),
			chromedp.Evaluate[chromedp.Void](`document.getElementById("try-result").replaceChildren()`),
			chromedp.Click(chromedp.CSS(`#try button`)),
		); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, "the form's answer", `document.getElementById("try-code") !== null`)
	}
	for range 2 {
		try("web", "user=bob")
		if code, rem := evalJS[string](t, ctx, `document.getElementById("try-code").textContent`), evalJS[string](t, ctx, `document.getElementById("try-remaining").textContent`); code != "OK" || rem != "1" {
			t.Fatalf("the form for bob: code %s remaining %s, want OK and 1", code, rem)
		}
	}
	try("web", "user=alice")
	if rem, full := evalJS[string](t, ctx, `document.getElementById("try-remaining").textContent`), evalJS[bool](t, ctx, `document.getElementById("try-full") !== null`); rem != "0" || !full {
		t.Errorf("the form for alice: remaining %s, at the limit %v; want 0 and the page saying the next request is refused", rem, full)
	}
	if c1, c2 := post(t, s.url, webReq("user", "bob")), post(t, s.url, webReq("user", "bob")); c1 != 200 || c2 != 429 {
		t.Errorf("bob after the form: %d then %d, want 200 then 429 (the form spent nothing)", c1, c2)
	}

	shots := cmpOr(os.Getenv("SLUICE_PAGE_SCREENSHOT"), filepath.Dir(cfg))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(shots, "page.png"), string(png))

	// 390 px wide: nothing scrolls sideways but the tables' own boxes.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	t.Logf("at 390: innerWidth %d clientWidth %d", evalJS[int](t, ctx, `window.innerWidth`), evalJS[int](t, ctx, `document.documentElement.clientWidth`))
	waitJS(t, ctx, "the narrow layout", `document.documentElement.clientWidth <= 390`)
	if w := evalJS[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("at 390 px the page is %d px wide: it scrolls sideways", w)
	}
	if ok := evalJS[bool](t, ctx, `(b => b.getBoundingClientRect().right <= 390 && b.getBoundingClientRect().width > 0)(document.querySelector("#try button"))`); !ok {
		t.Error("at 390 px the form's button is off screen")
	}
	narrow, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(shots, "page-390.png"), string(narrow))
	t.Logf("screenshots in %s", shots)

	checkConsoleClean(t, ctx, consoleErrors)
}

// checkConsoleClean fails t if the page in ctx logged a console error
// before now, and if a probe error it logs now is not seen by
// consoleErrors (then the console is not watched and a clean one proves
// nothing).
func checkConsoleClean(t *testing.T, ctx context.Context, consoleErrors func() []string) {
	t.Helper()
	before := consoleErrors()
	evalJS[chromedp.Void](t, ctx, `console.error("probe")`)
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(consoleErrors(), func(e string) bool { return strings.Contains(e, "probe") }) {
		if time.Now().After(deadline) {
			t.Fatal("a console.error of the page was not seen: the console is not watched")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(before) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(before, "\n"))
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
