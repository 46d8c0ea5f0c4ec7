package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testlog"
)

// What start-up refuses, -check refuses too, with the same exit status and
// a message naming the file and line of the setting (or the flag): a
// config that passes -check starts.
func TestProxyCheckRefusesWhatStartUpRefuses(t *testing.T) {
	dir := t.TempDir()
	const base = "upstream: http://127.0.0.1:1\nlimits: [{name: a, key: ip, rate: 1r/s, algorithm: token_bucket}]\nroutes: [{name: r, match: /, limits: [a]}]\n"
	for _, c := range []struct {
		name, yaml string
		code       int
		want       string
	}{
		{"missing secret file", base + "log_key_secret_file: " + filepath.Join(dir, "nope") + "\n", 2, "c.yaml:4: log_key_secret_file:"},
		{"short secret", base + "log_key_secret_file: " + filepath.Join(dir, "short") + "\n", 2, "c.yaml:4: log_key_secret_file:"},
		{"plans without -plans", base + "plans: {tenant_header: X-Tenant}\n", 2, "c.yaml:4: plans: needs -plans"},
		{"access log in no directory", base + "access_log: " + filepath.Join(dir, "no", "access.log") + "\n", 1, "c.yaml:4: access_log"},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(dir, "short"), []byte("too short\n"), 0o600)
			cfg := filepath.Join(dir, "c.yaml")
			if err := os.WriteFile(cfg, []byte(c.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb testlog.Buffer
			code := runProxy(context.Background(), []string{"-check", "-config", cfg}, &out, &errb)
			if code != c.code || !strings.Contains(errb.String(), c.want) {
				t.Errorf("-check: exit %d, stderr %q; want exit %d and %q", code, errb.String(), c.code, c.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var sout, serr testlog.Buffer
			if code := runProxy(ctx, []string{"-config", cfg, "-listen", "127.0.0.1:0", "-admin-addr", ""}, &sout, &serr); code != c.code {
				t.Errorf("start-up: exit %d (stderr %q), want %d as -check", code, serr.String(), c.code)
			}
		})
	}
	// The same config without those lines passes -check.
	cfg := filepath.Join(dir, "ok.yaml")
	os.WriteFile(cfg, []byte(base+"access_log: "+filepath.Join(dir, "access.log")+"\n"), 0o644)
	var out, errb testlog.Buffer
	if code := runProxy(context.Background(), []string{"-check", "-config", cfg}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "access.log")); err == nil {
		t.Error("-check created the access log")
	}
}
