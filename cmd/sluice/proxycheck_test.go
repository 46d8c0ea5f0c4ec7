package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/testlog"
	"github.com/sluicehq/sluice/internal/testpki"
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

// The admin listener's files are read by -check as by start-up: a missing
// token file, TLS certificate or client CA is refused by both with exit
// status 2 and the same message; readable ones pass -check.
func TestProxyCheckRefusesAdminFilesStartUpCannotRead(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("upstream: http://127.0.0.1:1\nlimits: [{name: a, key: ip, rate: 1r/s, algorithm: token_bucket}]\nroutes: [{name: r, match: /, limits: [a]}]\n"), 0o644)
	tls := tlsFiles(t, dir, testpki.NewCA(t, "server CA").Issue(t, "sluice", false, "127.0.0.1"), testpki.NewCA(t, "client CA"))
	token := filepath.Join(dir, "token")
	os.WriteFile(token, []byte("0123456789abcdef0123\n"), 0o600)
	nope := filepath.Join(dir, "nope")
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"missing token file", []string{"-admin-token-file", nope}, "admin token:"},
		{"missing TLS certificate", []string{"-admin-token-file", token, "-admin-tls-cert", nope, "-admin-tls-key", tls.Key}, "admin TLS:"},
		{"missing client CA", []string{"-admin-tls-cert", tls.Cert, "-admin-tls-key", tls.Key, "-admin-client-ca", nope}, "admin TLS:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb testlog.Buffer
			code := runProxy(context.Background(), append([]string{"-check", "-config", cfg, "-admin-addr", "127.0.0.1:0"}, c.flags...), &out, &errb)
			if code != 2 || !strings.Contains(errb.String(), c.want) || !strings.Contains(errb.String(), "nope") {
				t.Errorf("-check: exit %d, stderr %q; want exit 2 and %q naming the file", code, errb.String(), c.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var sout, serr testlog.Buffer
			args := append([]string{"-config", cfg, "-listen", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, c.flags...)
			if code := runProxy(ctx, args, &sout, &serr); code != 2 || !strings.Contains(serr.String(), c.want) {
				t.Errorf("start-up: exit %d (stderr %q), want 2 and %q as -check", code, serr.String(), c.want)
			}
		})
	}
	var out, errb testlog.Buffer
	args := []string{"-check", "-config", cfg, "-admin-addr", "127.0.0.1:0", "-admin-token-file", token,
		"-admin-tls-cert", tls.Cert, "-admin-tls-key", tls.Key, "-admin-client-ca", tls.ClientCA}
	if code := runProxy(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("readable admin files: exit %d: %s", code, errb.String())
	}
}
