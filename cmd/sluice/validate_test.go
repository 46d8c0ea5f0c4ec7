package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cfgTooBigForRedis is a token bucket that passes Limit.Validate and that
// redisstore cannot hold exactly (its rate_limit is reported at line 5).
const cfgTooBigForRedis = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1000000000\n      algorithm: token_bucket\n      burst: 9000000000000000\n"

// A rule the chosen store cannot serve is refused with its file:line by
// sluice check -store, at serve's start-up and on reload (which keeps the
// running config), instead of failing every request.
func TestRulesTheStoreCannotServeAreRefused(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "big.yaml")
	writeFile(t, bad, cfgTooBigForRedis)
	store := "redis://127.0.0.1:1" // no Redis there: validation needs none

	for _, tt := range []runCase{
		{[]string{"check", "-store", store, bad}, 1, "", bad + ":5"},
		{[]string{"check", "-store", "memory", bad}, 0, "token_bucket", ""},
	} {
		tt.check(t)
	}

	if code, errs := serveExit(t, 10*time.Second, "serve started with a rule Redis cannot serve", "-config", bad, "-store", store); code != 1 || !strings.Contains(errs, bad+":5") {
		t.Errorf("serve with a rule Redis cannot serve: exit %d, %q; want 1 and %s:5", code, errs, bad)
	}

	good := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, good, cfgBlocked)
	s := launch(t, "-config", good, "-store", store)
	writeFile(t, good, cfgTooBigForRedis)
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	eventually(t, "the reload refused", func() bool {
		return strings.Contains(s.stderr.String(), "reload failed") && strings.Contains(s.stderr.String(), good+":5")
	})
}

// cfgSlidingWindow is a rule every store but PostgreSQL serves (pgstore
// holds fixed windows only); its rate_limit is at line 5.
const cfgSlidingWindow = "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 10\n      algorithm: sliding_window\n"

// sluice check -store postgres://… checks the rules with PostgreSQL's
// rules, as serve does, not Redis's: a sliding window is refused with its
// file:line, whichever spelling of the scheme.
func TestCheckWithAPostgresStoreUsesPostgresRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sw.yaml")
	writeFile(t, path, cfgSlidingWindow)
	for _, tt := range []runCase{
		{[]string{"check", "-store", "postgres://127.0.0.1:1/db", path}, 1, "", path + ":5"},
		{[]string{"check", "-store", "PostgreSQL://127.0.0.1:1/db", path}, 1, "", path + ":5"},
		{[]string{"check", "-store", "redis://127.0.0.1:1", path}, 0, "sliding_window", ""},
	} {
		tt.check(t)
	}
}

// cfgBillable is a billable rule (its rate_limit block at line 5): only a
// PostgreSQL store keeps the ledger billable: true asks for.
const cfgBillable = "domain: d\ndescriptors:\n  - key: tenant\n    rate_limit:\n      unit: month\n      requests_per_unit: 1000\n      billable: true\n"

// billable: true is acted on by PostgreSQL alone: sluice check and serve
// refuse it, with its file:line, with the memory store and with Redis,
// which keep no ledger, rather than accepting a promise they cannot keep.
func TestBillableRulesAreRefusedByStoresWithoutALedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bill.yaml")
	writeFile(t, path, cfgBillable)
	for _, tt := range []runCase{
		{[]string{"check", "-store", "memory", path}, 1, "", path + ":5"},
		{[]string{"check", "-store", "redis://127.0.0.1:1", path}, 1, "", path + ":5"},
		{[]string{"check", "-store", "postgres://127.0.0.1:1/db", path}, 0, "billable", ""},
	} {
		tt.check(t)
	}
	if code, errs := serveExit(t, 10*time.Second, "serve started with a billable rule on memory", "-config", path, "-store", "memory"); code != 1 || !strings.Contains(errs, path+":5") || !strings.Contains(errs, "ledger") {
		t.Errorf("serve with a billable rule on memory: exit %d, %q; want 1, %s:5 and the reason", code, errs, path)
	}
}
