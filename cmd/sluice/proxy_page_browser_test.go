//go:build unix

package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"
)

// The live page of a running proxy in a real browser: it loads without
// console errors, follows the event stream, shows the proxy's limit with
// the traffic the test sends and the refused client's hashed key at the
// top, and its form reads a client's state under a limit.
func TestProxyLivePageInABrowser(t *testing.T) {
	t.Parallel() // waits on Chromium and the proxy; touches no process-wide state
	const token = "a-long-enough-admin-token"
	ctx, consoleErrors := browser(t, token)
	p, _ := launchProxyPage(t, token)
	if err := chromedp.Do(ctx, chromedp.Navigate(p.admin+"/page")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the event stream", `document.getElementById("live").textContent === "Live."`)
	var codes []int
	for range 4 {
		codes = append(codes, getStatus(t, p.url+"/api/x"))
	}
	if !slices.Equal(codes, []int{200, 200, 429, 429}) {
		t.Fatalf("codes %v", codes)
	}
	waitJS(t, ctx, "the counters of per_ip (2 allowed, 2 limited)",
		`[...document.querySelectorAll("#rules tbody tr")].some(r => r.cells[0].textContent === "per_ip" && r.cells[4].textContent === "2" && r.cells[5].textContent === "2")`)
	key := pageHash("per_ip:127.0.0.1")
	waitJS(t, ctx, "the client's hashed key at the top of the list",
		fmt.Sprintf(`(r => r && r.cells[0].textContent === %q && r.cells[2].textContent === "2")(document.querySelector("#top tbody tr"))`, key))

	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("try-domain"), "per_ip"),
		chromedp.SetValue(chromedp.ID("try-descriptor"), "key=127.0.0.9"),
		chromedp.Click(chromedp.CSS(`#try button`)),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the form's answer", `document.getElementById("try-remaining") !== null`)
	if rem := evalJS[string](t, ctx, `document.getElementById("try-remaining").textContent`); rem != "2" {
		t.Errorf("the form for an unseen client: remaining %s, want 2", rem)
	}

	checkConsoleClean(t, ctx, consoleErrors)
}
