package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/admin/page"
	"github.com/sluicehq/sluice/internal/testlog"
)

// secretStore is a PostgreSQL -store (nothing listens on port 1) with a
// secret in each place a connection string may hold one; secretsOf are
// those secrets.
const secretStore = "postgres://sluice:PwUser1@127.0.0.1:1/sluice?password=PwQuery2&sslpassword=PwSsl3&connect_timeout=2"

var secretsOf = []string{"PwUser1", "PwQuery2", "PwSsl3"}

// noSecret fails the test when what printed shows any of secretsOf.
func noSecret(t *testing.T, where, printed string) {
	t.Helper()
	for _, s := range secretsOf {
		if strings.Contains(printed, s) {
			t.Errorf("%s shows the secret %q: %s", where, s, printed)
		}
	}
}

// Every place that prints the store masks every secret of its URL, not
// only the user information's password: serve's banner, its start-up log,
// the live page's store name, the error of a failing connect, sluice
// migrate's error, and the help of sluice check and serve, whose -store
// default comes from REDIS_URL. Before, password=PwQuery2 and
// sslpassword=PwSsl3 were printed in the banner, the log and the page.
func TestEveryPrintedStoreHidesItsSecrets(t *testing.T) {
	dir := t.TempDir()
	cfg, tokenFile := filepath.Join(dir, "q.yaml"), filepath.Join(dir, "token")
	writeFile(t, cfg, cfgQuota(10))
	const token = "a-long-enough-admin-token"
	writeFile(t, tokenFile, token+"\n")

	// With -migrate=false serve starts without the database.
	var banner string
	s := startCmd(t, runServe, []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0",
		"-config", cfg, "-store", secretStore, "-migrate=false", "-admin-addr", "127.0.0.1:0", "-admin-token-file", tokenFile},
		func(out string) bool {
			banner = out
			return bannerHTTP.MatchString(out) && bannerDebug.MatchString(out)
		})
	if !strings.Contains(banner, "postgres://sluice:xxxxx@127.0.0.1:1/sluice?password=xxxxx&sslpassword=xxxxx") {
		t.Errorf("the banner does not show the store masked: %s", banner)
	}
	noSecret(t, "serve's banner", banner)
	m := regexp.MustCompile(`page=(http://127\.0\.0\.1:\d+/page)`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no page address in the log: %s", s.stderr.String())
	}
	_, body := adminGet(t, m[1]+"/data.json", token)
	var snap page.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil || snap.Store == nil {
		t.Fatalf("the page's snapshot: %v, %s", err, body)
	}
	if !strings.HasPrefix(snap.Store.Name, "postgres://sluice:xxxxx@") {
		t.Errorf("the page's store name %q is not the masked URL", snap.Store.Name)
	}
	noSecret(t, "the page's store name", snap.Store.Name)
	noSecret(t, "the page's snapshot", string(body))
	s.stop(t)
	noSecret(t, "serve's log", s.stderr.String())

	// Connecting (to migrate) fails: the error names the store, masked.
	var out, errb testlog.Buffer
	if code := runServe(context.Background(), []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-config", cfg, "-store", secretStore}, &out, &errb); code != 1 {
		t.Errorf("serve on an unreachable database: exit %d, want 1; stderr %s", code, errb.String())
	}
	if !strings.Contains(errb.String(), "127.0.0.1:1") {
		t.Errorf("the connect error does not name the database: %s", errb.String())
	}
	noSecret(t, "serve's connect error", out.String()+errb.String())
	var mout, merr bytes.Buffer
	if code := run([]string{"migrate", "-timeout", "5s", secretStore}, &mout, &merr); code != 1 {
		t.Errorf("sluice migrate on an unreachable database: exit %d, want 1; stderr %s", code, merr.String())
	}
	noSecret(t, "sluice migrate's error", mout.String()+merr.String())

	// A key=value connection string's password is masked as well.
	kv := "host=127.0.0.1 port=1 user=sluice password=PwUser1 connect_timeout=2"
	mout.Reset()
	merr.Reset()
	run([]string{"migrate", "-timeout", "5s", kv}, &mout, &merr)
	noSecret(t, "sluice migrate's error on a key=value string", mout.String()+merr.String())

	// -store's default is REDIS_URL's: the help shows it masked.
	t.Setenv("REDIS_URL", "redis://:PwUser1@127.0.0.1:6379/0?sentinel_password=PwQuery2")
	for _, cmd := range []string{"check", "serve"} {
		var hout, herr bytes.Buffer
		if code := run([]string{cmd, "-h"}, &hout, &herr); code != 0 {
			t.Errorf("sluice %s -h: exit %d", cmd, code)
		}
		if !strings.Contains(hout.String(), "redis://:xxxxx@127.0.0.1:6379/0") {
			t.Errorf("sluice %s -h does not show -store's default masked: %s", cmd, hout.String())
		}
		noSecret(t, "sluice "+cmd+" -h", hout.String()+herr.String())
	}
}

// sluice migrate prune on an unreachable database fails (exit 1) naming
// the database, with every secret of its URL or key=value string masked,
// as sluice migrate does.
func TestMigratePruneHidesTheStoresSecrets(t *testing.T) {
	for _, store := range []string{secretStore, "host=127.0.0.1 port=1 user=sluice password=PwUser1 connect_timeout=2"} {
		var out, errb bytes.Buffer
		code := run([]string{"migrate", "prune", "-older-than", "90d", "-timeout", "5s", store}, &out, &errb)
		if store == secretStore {
			if code != 1 {
				t.Errorf("sluice migrate prune on an unreachable database: exit %d, want 1; stderr %s", code, errb.String())
			}
			if !strings.Contains(errb.String(), "127.0.0.1:1") {
				t.Errorf("the error does not name the database: %s", errb.String())
			}
		}
		noSecret(t, "sluice migrate prune's output", out.String()+errb.String())
	}
}

// The proxy masks every secret of the URLs it prints: its Redis -store,
// its upstreams and its -plans database, in the banner (text and JSON)
// and on its log; and serve's -plans database in the error of a connect
// that fails. TestEveryPrintedStoreHidesItsSecrets reads serve's store
// only.
func TestProxyAndPlansPrintNoSecrets(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.yaml")
	writeFile(t, cfg, "plans: {tenant_header: X-Tenant}\nlimits: [{name: a, key: ip, rate: 1r/s, algorithm: token_bucket}]\nroutes: [{name: r, match: /, limits: [a]}]\n")
	upstream := "http://sluice:PwUser1@127.0.0.1:1/"
	redis := "redis://:PwQuery2@127.0.0.1:1/0"
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			p := launchProxy(t, "-config", cfg, "-upstream", upstream, "-store", redis, "-failure-mode", "open",
				"-plans", secretStore, "-log-format", format)
			eventually(t, "the plans line", func() bool { return strings.Contains(p.stderr.String(), "plans") })
			p.stop(t)
			out := p.stdout.String() + p.stderr.String()
			for _, masked := range []string{"redis://:xxxxx@127.0.0.1:1/0", "http://sluice:xxxxx@127.0.0.1:1/", "postgres://sluice:xxxxx@127.0.0.1:1/sluice?password=xxxxx&sslpassword=xxxxx"} {
				if !strings.Contains(out, masked) {
					t.Errorf("the proxy's output does not show %s: %s", masked, out)
				}
			}
			noSecret(t, "the proxy's banner and log", out)
		})
	}

	tokenFile := filepath.Join(dir, "token")
	writeFile(t, tokenFile, "a-long-enough-admin-token\n")
	rules := filepath.Join(dir, "q.yaml")
	writeFile(t, rules, cfgQuota(10))
	var out, errb testlog.Buffer
	code := runServe(context.Background(), []string{"-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0", "-config", rules,
		"-admin-addr", "127.0.0.1:0", "-admin-token-file", tokenFile, "-plans", secretStore}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "-plans postgres://sluice:xxxxx@127.0.0.1:1/") {
		t.Errorf("serve -plans on an unreachable database: exit %d, want 1 naming the masked URL; stderr %s", code, errb.String())
	}
	noSecret(t, "serve's -plans error", out.String()+errb.String())
}
