package admin_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admin"
)

// signIn opens a new login link of f's with the header pairs and returns
// the session cookie it sets, as a Cookie header.
func (f *fixture) signIn(t *testing.T, header ...string) string {
	t.Helper()
	link, _ := f.api.LoginLink(f.srv.URL)
	r := f.get(t, link, header...)
	c := sessionCookie(r)
	if r.StatusCode != 200 || c == nil {
		t.Fatalf("sign-in: %d, cookie %v", r.StatusCode, c)
	}
	return admin.SessionCookie + "=" + c.Value
}

// sessionID is how the audit log names the session of cookie.
func sessionID(cookie string) string {
	h := sha256.Sum256([]byte(strings.TrimPrefix(cookie, admin.SessionCookie+"=")))
	return "session:" + base64.RawURLEncoding.EncodeToString(h[:6])
}

// Past MaxSessions, the session that ends first gives way to a new sign-in,
// and not without a word: the audit log names the session ended and why,
// and the browser that held it is told, on its next call, that its session
// was ended to make room (401), not shown the anonymous refusal. Before,
// the session vanished and nothing said so.
func TestSessionsPastTheBoundEndTheOldestAndSaySo(t *testing.T) {
	f := sessionFixture(t)
	first := f.signIn(t)
	for range admin.MaxSessions - 1 {
		f.clock.Advance(time.Millisecond)
		f.signIn(t)
	}
	if r := f.get(t, f.srv.URL+"/page", "Cookie", first); r.StatusCode != 200 {
		t.Fatalf("the first of %d sessions: %d, want 200", admin.MaxSessions, r.StatusCode)
	}
	f.clock.Advance(time.Millisecond)
	f.signIn(t)
	code, body, _ := f.doCookie(t, "GET", "/page", first, "")
	if code != http.StatusUnauthorized || !strings.Contains(body, "ended") || !strings.Contains(body, admin.LoginPath) {
		t.Errorf("the first session after sign-in %d: %d %q; want 401 saying it was ended and where to sign in", admin.MaxSessions+1, code, body)
	}
	var line string
	for l := range strings.SplitSeq(f.log.String(), "\n") {
		if strings.Contains(l, "admin session ended") {
			line = l
		}
	}
	if !strings.Contains(line, sessionID(first)) || !strings.Contains(line, "64") {
		t.Errorf("the audit log's line of the session ended: %q; want it to name %s and the bound of 64", line, sessionID(first))
	}
}
