//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/service"
)

// descriptorAnswer is what peek and reset by descriptor print.
type descriptorAnswer struct {
	Keys []struct {
		Rule, Key, Hash, Limit string
		Remaining, Refunded    int
	}
}

func parseDescriptorAnswer(t *testing.T, out string) descriptorAnswer {
	t.Helper()
	var a descriptorAnswer
	if err := json.Unmarshal([]byte(out), &a); err != nil || len(a.Keys) != 1 {
		t.Fatalf("the answer %q (%v): want one key", out, err)
	}
	return a
}

// `sluice admin peek` and `reset` in the user's words against a running
// serve: -domain and -descriptor resolve the rule from the loaded config;
// peek spends nothing and shows the key and the live page's hash of it;
// reset gives back all that was spent; a descriptor no rule matches is
// an error (exit 1, 404), not a fresh key; `sluice admin login` prints a
// link that signs a browser in once.
func TestAdminCLIByDescriptorOnServe(t *testing.T) {
	const token = "a-long-enough-admin-token"
	s, pageURL, _ := launchPage(t, token)
	api := strings.TrimSuffix(pageURL, "/page")
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, token+"\n")
	for range 2 {
		post(t, s.url, webReq("user", "alice"))
	}
	key := service.StoreKey("", "web", []config.Entry{{Key: "user", Value: "alice"}})
	for range 2 {
		code, out, errs := adminCLI(t, api, tokenFile, "peek", "-domain", "web", "-descriptor", "user=alice")
		if code != 0 {
			t.Fatalf("peek by descriptor: exit %d: %s", code, errs)
		}
		a := parseDescriptorAnswer(t, out)
		if k := a.Keys[0]; k.Remaining != 1 || k.Key != key || k.Hash != pageHash(key) || k.Rule != "web.user" {
			t.Errorf("peek of user=alice after 2 of 3: %s, want 1 remaining at %s, hash %s", out, key, pageHash(key))
		}
	}
	code, out, errs := adminCLI(t, api, tokenFile, "reset", "-domain", "web", "-descriptor", "user=alice")
	if a := parseDescriptorAnswer(t, out); code != 0 || a.Keys[0].Refunded != 2 || a.Keys[0].Remaining != 3 {
		t.Errorf("reset of user=alice: exit %d %s %s, want 2 refunded, 3 remaining", code, out, errs)
	}
	var codes []int
	for range 4 {
		codes = append(codes, post(t, s.url, webReq("user", "alice")))
	}
	if fmt.Sprint(codes) != "[200 200 200 429]" {
		t.Errorf("alice after the reset: %v, want her 3 back", codes)
	}
	for _, desc := range [][]string{{"-domain", "web", "-descriptor", "nobody=x"}, {"-domain", "nope", "-descriptor", "user=alice"}} {
		if code, out, errs := adminCLI(t, api, tokenFile, append([]string{"peek"}, desc...)...); code != 1 || !strings.Contains(errs, "404") || !strings.Contains(errs, "no rule") {
			t.Errorf("peek %v: exit %d %q %q, want 1 with 404 and no rule", desc, code, out, errs)
		}
	}
	if code, _, errs := adminCLI(t, api, tokenFile, "peek", "-domain", "web"); code != 2 {
		t.Errorf("peek without -descriptor: exit %d %q, want 2", code, errs)
	}

	code, out, errs = adminCLI(t, api, tokenFile, "login")
	var link struct{ URL string }
	if code != 0 || json.Unmarshal([]byte(out), &link) != nil || !strings.HasPrefix(link.URL, api+"/login?code=") {
		t.Fatalf("sluice admin login: exit %d %q %q, want a link on %s", code, out, errs, api)
	}
	for i, want := range []int{200, 403} {
		resp, err := http.Get(link.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("the link, use %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}

// When the CLI reaches no admin API it says which URL it tried and where
// the API is: a port nothing listens on, and serve's public HTTP
// listener (which answers 404 to the API's paths).
func TestAdminCLISaysWhichURLItTried(t *testing.T) {
	s, _, _ := launchPage(t, "a-long-enough-admin-token")
	for _, c := range []struct{ url, want string }{
		{"127.0.0.1:1", "tried http://127.0.0.1:1/v1/descriptors/peek, -url"},
		{s.url, "no admin API there"},
	} {
		code, _, errs := adminCLI(t, c.url, "", "peek", "-domain", "web", "-descriptor", "user=alice")
		if code != 1 || !strings.Contains(errs, c.want) || !strings.Contains(errs, "-admin-addr") {
			t.Errorf("-url %s: exit %d %q, want 1 saying %q and where the admin API is", c.url, code, errs, c.want)
		}
	}
}

// The same words on the proxy: -domain names a limit, the descriptor's
// one entry is the value of its key (a client IP); reset gives the
// client its requests back; the banner's login line signs a browser in.
func TestAdminCLIByDescriptorOnTheProxy(t *testing.T) {
	const token = "a-long-enough-admin-token"
	p, _ := launchProxyPage(t, token)
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, token+"\n")
	for range 3 {
		getStatus(t, p.url+"/api/x")
	}
	code, out, errs := adminCLI(t, p.admin, tokenFile, "peek", "-domain", "per_ip", "-descriptor", "key=127.0.0.1")
	if a := parseDescriptorAnswer(t, out); code != 0 || a.Keys[0].Remaining != 0 || a.Keys[0].Hash != pageHash("per_ip:127.0.0.1") {
		t.Errorf("peek of per_ip for 127.0.0.1: exit %d %s %s, want 0 remaining and the page's hash", code, out, errs)
	}
	code, out, errs = adminCLI(t, p.admin, tokenFile, "reset", "-domain", "per_ip", "-descriptor", "key=127.0.0.1")
	if a := parseDescriptorAnswer(t, out); code != 0 || a.Keys[0].Refunded != 2 {
		t.Errorf("reset of per_ip for 127.0.0.1: exit %d %s %s, want 2 refunded", code, out, errs)
	}
	if c := getStatus(t, p.url+"/api/x"); c != 200 {
		t.Errorf("the client after the reset: %d, want 200", c)
	}
	if code, _, errs := adminCLI(t, p.admin, tokenFile, "peek", "-domain", "nope", "-descriptor", "key=127.0.0.1"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("peek of a limit the proxy does not have: exit %d %q, want 1 with 404", code, errs)
	}
	m := regexp.MustCompile(`login      (http://\S+)`).FindStringSubmatch(p.stdout.String())
	if m == nil {
		t.Fatalf("no login line in the banner: %s", p.stdout.String())
	}
	resp, err := http.Get(m[1])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Set-Cookie"), "sluice_session=") {
		t.Errorf("the banner's login link: %d %q, want 200 and a session cookie", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}

// -admin-login-link=false keeps the one-time link, a credential, out of
// serve's log and the proxy's banner, and browser sign-in still works:
// sluice admin login mints a link that opens the page. Without the flag
// both print one (TestAdminCLIByDescriptorOnTheProxy, the browser test).
func TestNoLoginLinkInTheLogWhenTurnedOff(t *testing.T) {
	const token = "a-long-enough-admin-token"
	tokenFile := filepath.Join(t.TempDir(), "token")
	writeFile(t, tokenFile, token+"\n")
	s, _, _ := launchPage(t, token, "-admin-login-link=false")
	p, _ := launchProxyPage(t, token, "-admin-login-link=false")
	for name, out := range map[string]string{"serve's log": s.stderr.String(), "the proxy's banner": p.stdout.String() + p.stderr.String()} {
		if strings.Contains(out, "code=") {
			t.Errorf("%s holds a login link with -admin-login-link=false:\n%s", name, out)
		}
		if !strings.Contains(out, "sluice admin login") {
			t.Errorf("%s does not say how to get a link:\n%s", name, out)
		}
	}
	api := regexp.MustCompile(`admin API.*?(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(s.stderr.String())
	if api == nil {
		t.Fatalf("no admin API address in the log: %s", s.stderr.String())
	}
	for _, base := range []string{api[1], p.admin} {
		code, out, errs := adminCLI(t, base, tokenFile, "login")
		var link struct{ URL string }
		if code != 0 || json.Unmarshal([]byte(out), &link) != nil {
			t.Fatalf("sluice admin login on %s: exit %d %q %q", base, code, out, errs)
		}
		resp, err := http.Get(link.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Set-Cookie"), "sluice_session=") {
			t.Errorf("the minted link on %s: %d %q, want 200 and a session cookie", base, resp.StatusCode, resp.Header.Get("Set-Cookie"))
		}
	}
	if code := run([]string{"serve", "-admin-login-link=false"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("-admin-login-link without -admin-addr: exit %d, want 2", code)
	}
}
