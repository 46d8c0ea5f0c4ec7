//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/config"
	"github.com/sluicehq/sluice/internal/pgtest"
	"github.com/sluicehq/sluice/internal/testpki"
	"github.com/sluicehq/sluice/service"
)

// adminCLI runs `sluice admin` against url with the token in tokenFile.
func adminCLI(t *testing.T, url, tokenFile string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	all := append([]string{"admin", "-url", url}, args...)
	if tokenFile != "" {
		all = append([]string{"admin", "-url", url, "-token-file", tokenFile}, args...)
	}
	code = run(all, &out, &errb)
	return code, out.String(), errb.String()
}

// Every admin operation round-trips through the CLI to a real serve on
// PostgreSQL: a plan raises a tenant's quota on the next decision, an
// override lowers it, peek and usage report the count the store holds,
// usage equals the ledger export (CSV and JSON), reset gives the units
// back, clearing twice and assigning a missing plan fail with 404, a call
// without a token fails with 401, and every call is in the audit log.
func TestAdminCLIRoundTripsEveryOperation(t *testing.T) {
	t.Parallel() // waits on serve; touches no process-wide state
	srv := pgtest.StartServer(t)
	url := srv.Schema(t)
	dir := t.TempDir()
	cfg, tokenFile := filepath.Join(dir, "q.yaml"), filepath.Join(dir, "token")
	writeFile(t, cfg, cfgQuota(2))
	writeFile(t, tokenFile, "a-long-enough-admin-token\n")
	s := launch(t, "-config", cfg, "-store", url, "-plans", url, "-plans-tenant-key", "user",
		"-admin-addr", "127.0.0.1:0", "-admin-token-file", tokenFile)
	m := regexp.MustCompile(`admin API.*?(http://127\.0\.0\.1:\d+)`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no admin API address in the log: %s", s.stderr.String())
	}
	api := m[1]
	ok := func(args ...string) string {
		t.Helper()
		code, out, errs := adminCLI(t, api, tokenFile, args...)
		if code != 0 {
			t.Fatalf("sluice admin %v: exit %d: %s", args, code, errs)
		}
		return out
	}
	reqBob := strings.ReplaceAll(reqAlice, "alice", "bob")

	if out := ok("set-plan", "pro", `{"q.user": {"rate": 5, "period": "24h"}}`); out != "ok\n" {
		t.Errorf("set-plan printed %q", out)
	}
	ok("assign", "alice", "pro")
	var codes []int
	for range 4 {
		codes = append(codes, post(t, s.url, reqAlice), post(t, s.url, reqBob))
	}
	if fmt.Sprint(codes) != "[200 200 200 200 200 429 200 429]" {
		t.Errorf("alice (pro: 5/day) and bob (the rule's 2/day) alternating: %v", codes)
	}
	ok("override", "alice", "q.user", `{"rate": 1, "period": "24h"}`, "1h")
	if c := post(t, s.url, reqAlice); c != 429 {
		t.Errorf("alice after an override of 1/day: %d, want 429", c)
	}

	key := service.StoreKey("", "q", []config.Entry{{Key: "user", Value: "alice"}})
	if out := ok("peek", key, `{"rate": 5, "period": "24h"}`); !strings.Contains(out, `"remaining":1`) {
		t.Errorf("peek of alice under 5/day: %s, want remaining 1 (4 spent)", out)
	}
	var usage struct {
		Periods []struct {
			Start string
			Count int64
		}
	}
	if err := json.Unmarshal([]byte(ok("usage", key)), &usage); err != nil || len(usage.Periods) != 1 || usage.Periods[0].Count != 4 {
		t.Fatalf("usage of alice: %+v (%v), want one period of 4", usage, err)
	}
	checkLedger(t, ok, key, usage.Periods[0].Start, usage.Periods[0].Count)

	if out := ok("reset", key, `{"rate": 5, "period": "24h"}`); !strings.Contains(out, `"refunded":4`) || !strings.Contains(out, `"remaining":5`) {
		t.Errorf("reset of alice: %s, want 4 refunded, 5 remaining", out)
	}
	ok("clear-override", "alice", "q.user")
	if c := post(t, s.url, reqAlice); c != 200 {
		t.Errorf("alice after reset and clearing the override (pro: 5/day): %d, want 200", c)
	}
	checkAdminRefusals(t, api, tokenFile, key)
	checkAuditLog(t, s.stderr.String())
}

// checkLedger checks the ledger export over the last two days, as JSON
// and as CSV, against alice's usage (one period starting aliceStart,
// aliceCount units under aliceKey) and bob's 2; ok runs `sluice admin`.
func checkLedger(t *testing.T, ok func(args ...string) string, aliceKey, aliceStart string, aliceCount int64) {
	t.Helper()
	from, to := time.Now().Add(-48*time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var ledger []struct {
		Key   string
		Start string
		Count int64
	}
	if err := json.Unmarshal([]byte(ok("ledger", from, to, "json")), &ledger); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int64{}
	for _, e := range ledger {
		counts[e.Key] += e.Count
		if e.Key == aliceKey && e.Start != aliceStart {
			t.Errorf("ledger period of alice starts %s, usage says %s", e.Start, aliceStart)
		}
	}
	bobKey := service.StoreKey("", "q", []config.Entry{{Key: "user", Value: "bob"}})
	if len(ledger) != 2 || counts[aliceKey] != aliceCount || counts[bobKey] != 2 {
		t.Errorf("ledger %+v, want alice %d (as usage) and bob 2", ledger, aliceCount)
	}
	csv := ok("ledger", from, to, "csv")
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[0], "key,start,end,count,quota,updated") {
		t.Errorf("CSV ledger: %q", csv)
	}
}

// checkAdminRefusals checks that the admin API refuses, with exit 1 and
// its status, clearing a cleared override, assigning a missing plan, a
// plan the store cannot serve and a call without a token.
func checkAdminRefusals(t *testing.T, api, tokenFile, key string) {
	t.Helper()
	if code, _, errs := adminCLI(t, api, tokenFile, "clear-override", "alice", "q.user"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("clearing twice: exit %d %q, want 1 with 404", code, errs)
	}
	if code, _, errs := adminCLI(t, api, tokenFile, "assign", "alice", "gold"); code != 1 || !strings.Contains(errs, "404") {
		t.Errorf("assigning a missing plan: exit %d %q, want 1 with 404", code, errs)
	}
	// PostgreSQL serves fixed windows only: a token bucket plan would
	// fail every request of its tenants, so it is refused when written.
	if code, _, errs := adminCLI(t, api, tokenFile, "set-plan", "bucket", `{"q.user": {"rate": 5, "period": "1s", "algorithm": "token_bucket", "burst": 5}}`); code != 1 || !strings.Contains(errs, "400") || !strings.Contains(errs, "fixed_window") {
		t.Errorf("a token_bucket plan on PostgreSQL: exit %d %q, want 1 with 400 saying fixed_window", code, errs)
	}
	if code, _, errs := adminCLI(t, api, "", "usage", key); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("no token: exit %d %q, want 1 with 401", code, errs)
	}
}

// checkAuditLog checks that the log has an audit line of each admin
// operation, one per call.
func checkAuditLog(t *testing.T, log string) {
	t.Helper()
	for _, op := range []string{"PUT /v1/plans/{plan}", "PUT /v1/tenants/{tenant}/plan", "PUT /v1/tenants/{tenant}/overrides/{name}",
		"DELETE /v1/tenants/{tenant}/overrides/{name}", "POST /v1/keys/peek", "POST /v1/keys/reset", "GET /v1/usage", "GET /v1/ledger"} {
		if !strings.Contains(log, op) {
			t.Errorf("the audit log has no line of %s", op)
		}
	}
	if n := strings.Count(log, "admin call"); n != 13 {
		t.Errorf("%d audit lines, want 13 (one per call)", n)
	}
}

// Settings that could not be acted on are refused at start (exit 2): admin
// flags without -admin-addr, an admin listener nobody can authenticate to.
func TestServeRefusesAdminSettingsItCannotActOn(t *testing.T) {
	for _, args := range [][]string{
		{"-admin-token-file", "/nonexistent"},
		{"-admin-addr", "127.0.0.1:0"},
		{"-plans-staleness", "2s"},
		{"-plans", "redis://localhost:6379"},
		{"-admin-addr", "127.0.0.1:0", "-admin-tls-cert", "c.pem"},
	} {
		var out, errb bytes.Buffer
		if code := run(append([]string{"serve", "-http-addr", "127.0.0.1:0", "-grpc-addr", "127.0.0.1:0"}, args...), &out, &errb); code != 2 {
			t.Errorf("serve %v: exit %d (%s), want 2", args, code, errb.String())
		}
	}
}

// With -admin-client-ca, a client whose certificate chains to the CA is
// served without a token and audited by its certificate's subject; one
// without a certificate or token gets 401, one with another CA's
// certificate no TLS connection at all.
func TestAdminMTLS(t *testing.T) {
	dir := t.TempDir()
	serverCA, clientCA, otherCA := testpki.NewCA(t, "server-ca"), testpki.NewCA(t, "client-ca"), testpki.NewCA(t, "other-ca")
	srvLeaf := serverCA.Issue(t, "sluice", false, "127.0.0.1")
	files := map[string][]byte{"tls.crt": srvLeaf.CertPEM, "tls.key": srvLeaf.KeyPEM, "clients.pem": clientCA.PEM, "server-ca.pem": serverCA.PEM}
	ops, stranger := clientCA.Issue(t, "ops", true), otherCA.Issue(t, "ops", true)
	files["ops.crt"], files["ops.key"], files["x.crt"], files["x.key"] = ops.CertPEM, ops.KeyPEM, stranger.CertPEM, stranger.KeyPEM
	for name, b := range files {
		writeAtomic(t, filepath.Join(dir, name), string(b))
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	s := launch(t, "-admin-addr", "127.0.0.1:0", "-admin-tls-cert", p("tls.crt"), "-admin-tls-key", p("tls.key"), "-admin-client-ca", p("clients.pem"))
	m := regexp.MustCompile(`admin API.*?(https://127\.0\.0\.1:\d+)`).FindStringSubmatch(s.stderr.String())
	if m == nil {
		t.Fatalf("no admin API address in the log: %s", s.stderr.String())
	}
	peek := []string{"peek", "example_user_alice", `{"rate": 3, "period": "1m"}`}
	code, out, errs := adminCLI(t, m[1], "", append([]string{"-ca", p("server-ca.pem"), "-cert", p("ops.crt"), "-key", p("ops.key")}, peek...)...)
	if code != 0 || !strings.Contains(out, `"remaining":3`) {
		t.Errorf("with the client certificate: exit %d %s %s, want the key's state", code, out, errs)
	}
	if !strings.Contains(s.stderr.String(), `who="cert:CN=ops"`) {
		t.Errorf("the audit line does not name the certificate: %s", s.stderr.String())
	}
	if code, _, errs := adminCLI(t, m[1], "", append([]string{"-ca", p("server-ca.pem")}, peek...)...); code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("without certificate or token: exit %d %q, want 1 with 401", code, errs)
	}
	if code, _, errs := adminCLI(t, m[1], "", append([]string{"-ca", p("server-ca.pem"), "-cert", p("x.crt"), "-key", p("x.key")}, peek...)...); code != 1 || strings.Contains(errs, "200") {
		t.Errorf("another CA's certificate: exit %d %q, want 1 (no TLS connection)", code, errs)
	}
}

// `sluice admin -url http://` (no host) exits 2 naming -url and the value,
// before any call; before, it dialled http://http: and failed with exit 1.
func TestAdminURLWithoutAHostIsExit2(t *testing.T) {
	for _, u := range []string{"http://", "https://", "http://:9901", "sluice:"} {
		code, _, stderr := adminCLI(t, u, "", "usage", "alice")
		if code != 2 || !strings.Contains(stderr, `-url "`+u+`"`) {
			t.Errorf("-url %q: exit %d, stderr %q; want 2 naming -url and the value", u, code, stderr)
		}
	}
}
