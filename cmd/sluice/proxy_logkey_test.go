package main

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/testlog"
)

// -log-key-secret-file (or the file's log_key_secret_file) sets the secret of the keyed hash that refusal
// lines show of a key: proxies given the same secret (replicas) write the
// same hash for a client, another secret another hash; a secret too short
// to be one is refused.
func TestProxyLogKeySecretFile(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer up.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.yaml")
	writeFile(t, cfg, proxyCfg) // per_ip, 2 an hour, on /api/
	s1, s2, short := filepath.Join(dir, "s1"), filepath.Join(dir, "s2"), filepath.Join(dir, "short")
	writeFile(t, s1, "0123456789abcdef0123456789abcdef\n")
	writeFile(t, s2, "fedcba9876543210fedcba9876543210\n")
	writeFile(t, short, "guessable\n")
	keyRe := regexp.MustCompile(`httplimit: refused.* key=(\S+)`)
	logged := func(args ...string) string {
		t.Helper()
		p := launchProxy(t, append([]string{"-config", cfg, "-upstream", up.URL, "-access-log", "off"}, args...)...)
		for range 3 {
			getStatus(t, p.url+"/api/x")
		}
		p.stop(t)
		m := keyRe.FindStringSubmatch(p.stderr.String())
		if m == nil {
			t.Fatalf("no refusal line with a key: %s", p.stderr.String())
		}
		return m[1]
	}
	a, b, c := logged("-log-key-secret-file", s1), logged("-log-key-secret-file", s1), logged("-log-key-secret-file", s2)
	if a != b || a == c || strings.Contains(a, "127.0.0.1") {
		t.Errorf("secret 1: %q and %q (want equal), secret 2: %q (want another)", a, b, c)
	}
	// The config's log_key_secret_file, as the flag.
	withKey := filepath.Join(dir, "with-key.yaml")
	writeFile(t, withKey, proxyCfg+"log_key_secret_file: "+s1+"\n")
	if d := logged("-config", withKey); d != a {
		t.Errorf("log_key_secret_file secret 1: %q, want %q as with the flag", d, a)
	}
	var out, errb testlog.Buffer
	if code := runProxy(t.Context(), []string{"-config", cfg, "-upstream", up.URL, "-log-key-secret-file", short}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "want 16 at least") {
		t.Errorf("a 9-byte secret: exit %d, %q; want 2 and why", code, errb.String())
	}
}
