//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/internal/daemon"
)

// -admin-raw-keys without -admin-addr is refused: there is no page whose
// keys it could show.
func TestServeRefusesAdminRawKeysWithoutAdminAddr(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-admin-raw-keys"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d (%s), want 2", code, errb.String())
	}
}

// The page is behind the admin API's authentication and audit log; its
// JSON shows the config's source, the store, serve's decisions and, with
// -admin-raw-keys, the refused key as it is; a reload shows the new
// rules.
func TestServePageBehindAdminAuthWithRawKeys(t *testing.T) {
	const token = "a-long-enough-admin-token"
	s, pageURL, cfg := launchPage(t, token, "-admin-raw-keys")
	if code, _ := adminGet(t, pageURL, ""); code != http.StatusUnauthorized {
		t.Fatalf("the page without a token: %d, want 401", code)
	}
	if code, body := adminGet(t, pageURL, token); code != http.StatusOK || !bytes.Contains(body, []byte("Try a descriptor")) {
		t.Fatalf("the page with the token: %d %.200s", code, body)
	}
	for range 4 {
		post(t, s.url, webReq("user", "carol"))
	}
	_, body := adminGet(t, pageURL+"/data.json", token)
	var snap page.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		t.Fatal(err)
	}
	if snap.Config == nil || snap.Config.Source != cfg || len(snap.Config.Domains) != 1 || snap.Store == nil || snap.Store.Name != "memory" || snap.Store.Breaker != "none" {
		t.Fatalf("config %+v store %+v", snap.Config, snap.Store)
	}
	if len(snap.Refusals) != 1 || !strings.Contains(snap.Refusals[0].Key, "carol") || len(snap.Top) != 1 || snap.Top[0].Key != snap.Refusals[0].Key {
		t.Fatalf("refusals %+v top %+v, want carol's raw key", snap.Refusals, snap.Top)
	}
	// A reload: the page shows the new rule and a later load time.
	writeFile(t, cfg, pageCfg+"  - key: team\n    rate_limit: {unit: hour, requests_per_unit: 7}\n")
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, body := adminGet(t, pageURL+"/data.json", token)
		var after page.Snapshot
		if err := json.Unmarshal(body, &after); err != nil {
			t.Fatal(err)
		}
		if rules := after.Config.Domains[0].Rules; len(rules) == 3 && after.Config.Loaded.After(snap.Config.Loaded) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page still shows %+v after the config changed", after.Config)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(s.stderr.String(), `op="GET /page/data.json"`) && !strings.Contains(s.stderr.String(), "GET /page/data.json") {
		t.Errorf("no audit line for the page's JSON: %s", s.stderr.String())
	}
}

// A browser following the page's event stream does not hold serve's
// drain: the stream ends when serve stops, well within daemon.DrainGrace.
func TestServeStopsPromptlyWithAPageStreamOpen(t *testing.T) {
	const token = "a-long-enough-admin-token"
	s, pageURL, _ := launchPage(t, token)
	req, _ := http.NewRequest(http.MethodGet, pageURL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := resp.Body.Read(make([]byte, 64)); err != nil {
		t.Fatalf("the stream sent nothing: %v", err)
	}
	start := time.Now()
	s.stop(t)
	if took := time.Since(start); took > daemon.DrainGrace/2 {
		t.Errorf("serve took %v to stop with a stream open (drainGrace %v)", took, daemon.DrainGrace)
	}
}

// With a store that does not answer, the page says so: not connected,
// the failure mode, and the breaker open once decisions have failed.
func TestServePageShowsAFailingStore(t *testing.T) {
	const token = "a-long-enough-admin-token"
	s, pageURL, _ := launchPage(t, token, "-store", "redis://127.0.0.1:1")
	var st *page.StoreState
	eventually(t, "the breaker opening", func() bool {
		post(t, s.url, webReq("user", "dave"))
		_, body := adminGet(t, pageURL+"/data.json", token)
		var snap page.Snapshot
		if err := json.Unmarshal(body, &snap); err != nil {
			t.Fatal(err)
		}
		st = snap.Store
		// One key: its partition opens ("partial"), or the whole breaker.
		return st != nil && (st.Breaker == "open" || st.Breaker == "partial" && st.OpenPartitions > 0)
	})
	if st.Connected || st.FailureMode != "local" || !strings.HasPrefix(st.Name, "redis://127.0.0.1:1") {
		t.Errorf("store %+v, want not connected, failure mode local (the default)", st)
	}
}

// launchPage starts serve on pageCfg with an admin listener whose token
// is token and whose page hashes keys under pageKeySecret, and args, and returns it, the page's URL from its log and the
// config file's path.
func launchPage(t *testing.T, token string, args ...string) (s *server, pageURL, cfg string) {
	t.Helper()
	dir := t.TempDir()
	cfg, tokenFile, secretFile := filepath.Join(dir, "web.yaml"), filepath.Join(dir, "token"), filepath.Join(dir, "key-secret")
	writeFile(t, cfg, pageCfg)
	writeFile(t, tokenFile, token+"\n")
	writeFile(t, secretFile, pageKeySecret+"\n")
	s = launch(t, append([]string{"-config", cfg, "-admin-addr", "127.0.0.1:0", "-admin-token-file", tokenFile, "-log-key-secret-file", secretFile}, args...)...)
	m := regexp.MustCompile(`page=(http://127\.0\.0\.1:\d+/page)`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no page address in the log: %s", s.stderr.String())
	}
	return s, m[1], cfg
}
